//! `/resource_providers` and `/resource_providers/{uuid}`: create, show, list with
//! filters, update (rename, re-parent) and delete providers.

use allot_core::ops::providers::ProviderInfo;
use allot_core::query::ProviderQuery;
use allot_core::Uuid;
use allot_store::WriteKind;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;

use crate::context::Ctx;
use crate::error::{ApiError, ApiResult};
use crate::http;
use crate::microversion::Version;
use crate::policy::{authorize, Action};
use crate::request::path::{no_provider, ProviderBody, ProviderPath};
use crate::request::providers::{list_query, NewProvider, ProviderUpdate};
use crate::request::JsonBody;
use crate::{wire, AppState};

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/resource_providers", get(list).post(create))
        .route(
            "/resource_providers/{uuid}",
            get(show).put(update).delete(delete),
        )
        // The query form's URL shadows `{uuid}` for the one segment no provider's uuid
        // can be: Placement's 404 for `GET /resource_providers/query` becomes a 405
        // (docs/api.md, "Query forms").
        .route("/resource_providers/query", post(query))
}

/// The URL of a provider.
pub fn provider_url(uuid: &Uuid) -> String {
    format!("/resource_providers/{uuid}")
}

/// A provider's body at the request's microversion.
pub fn serialize(version: Version, p: &ProviderInfo) -> wire::ProviderBody<'_> {
    let in_tree = version.at_least(14);
    wire::ProviderBody {
        generation: p.generation,
        links: wire::ProviderLinks::at(p.uuid, version.0),
        name: &p.name,
        parent_provider_uuid: in_tree.then_some(p.parent_uuid.as_ref()),
        root_provider_uuid: in_tree.then_some(&p.root_uuid),
        uuid: &p.uuid,
        usages: None,
        pending: None,
    }
}

/// `GET /resource_providers/{uuid}`.
pub async fn show(ctx: Ctx, State(app): State<AppState>, path: ProviderPath) -> ApiResult {
    // A path that is not UTF-8 is refused before anything else.
    path.raw()?;
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::ProvidersShow)?;
    let info = {
        let view = app.host.read();
        let provider = path.provider(&view, no_provider)?;
        view.provider_info(provider)
    };
    let response = http::json(StatusCode::OK, &serialize(ctx.version, &info));
    Ok(ctx.cached(response, info.updated_at))
}

/// `POST /resource_providers`: 201 with only a `location` before 1.20, 200 with the
/// provider from 1.20.
pub async fn create(ctx: Ctx, State(app): State<AppState>, body: JsonBody) -> ApiResult {
    body.require_json()?;
    authorize(&ctx, app.config.settings.policy, Action::ProvidersCreate)?;
    let NewProvider { name, uuid, parent } = NewProvider::read(&body, ctx.version.0)?;
    let uuid = uuid.unwrap_or_else(Uuid::new_v4);
    let info = app
        .write(WriteKind::Provider, move |view, now| {
            view.create_provider(uuid, &name, parent, now)
        })
        .await?;
    let url = provider_url(&info.uuid);
    if !ctx.version.at_least(20) {
        return Ok(http::location(http::empty(StatusCode::CREATED), &url));
    }
    let response = http::json(StatusCode::OK, &serialize(ctx.version, &info));
    // Placement's object has no timestamps of its own right after the insert: "now".
    Ok(http::location(
        http::cache_headers(response, app.host.now()),
        &url,
    ))
}

/// `PUT /resource_providers/{uuid}`: rename, and from 1.14 set the parent (from 1.37
/// change or remove it).
pub async fn update(ctx: Ctx, State(app): State<AppState>, sent: ProviderBody) -> ApiResult {
    let ProviderBody { path, body } = sent;
    path.raw()?;
    body.require_json()?;
    authorize(&ctx, app.config.settings.policy, Action::ProvidersUpdate)?;
    let target = path.provider(&app.host.read(), no_provider)?.uuid();
    let ProviderUpdate { name, parent } = ProviderUpdate::read(&body, ctx.version.0)?;
    let allow_reparenting = ctx.version.at_least(37);
    let (info, previous_update) = app
        .write(WriteKind::Provider, move |view, now| {
            view.update_provider(&target, &name, parent, allow_reparenting, now)
        })
        .await?;
    let response = http::json(StatusCode::OK, &serialize(ctx.version, &info));
    Ok(ctx.cached(response, previous_update))
}

/// `DELETE /resource_providers/{uuid}`.
pub async fn delete(ctx: Ctx, State(app): State<AppState>, path: ProviderPath) -> ApiResult {
    let plan = checked_delete(&ctx, &app, &path)?;
    app.write(WriteKind::Provider, plan).await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

/// `DELETE /resource_providers/{uuid}`'s checks, in Placement's order: the plan,
/// which the handler hands to the writer and a dry run (`crate::handlers::dry_run`)
/// plans on a copy of the view.
pub(crate) fn checked_delete(
    ctx: &Ctx,
    app: &AppState,
    path: &ProviderPath,
) -> Result<super::CheckedPlan<()>, ApiError> {
    path.raw()?;
    authorize(ctx, app.config.settings.policy, Action::ProvidersDelete)?;
    let target = path.uuid(|uuid| format!("{} for delete", no_provider(uuid)))?;
    Ok(Box::new(move |view, now| {
        view.delete_provider(&target, now)
    }))
}

/// `POST /resource_providers/query` (allot's extension): the parameters of `GET
/// /resource_providers` in a JSON body (`request::query_form`), answered as the `GET`
/// answers them (`POST /resource_providers` stays Placement's create).
pub async fn query(ctx: Ctx, State(app): State<AppState>, body: JsonBody) -> ApiResult {
    body.require_json()?;
    let raw = crate::request::query_form::query_string(&body)?;
    list(ctx, State(app), RawQuery(Some(raw))).await
}

/// `GET /resource_providers?name=&uuid=&member_of=&resources=&in_tree=&required=`,
/// and allot's `with_usages=true` (each provider's usages and pending amounts), `limit`
/// and `marker` (pages in the listing's order, a page starting after the provider
/// `marker` names).
pub async fn list(ctx: Ctx, State(app): State<AppState>, RawQuery(raw): RawQuery) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::ProvidersList)?;
    let (query, page) = list_query(ctx.version, raw.as_deref())?;
    let now = app.host.now();
    let query = ProviderQuery { now, ..query };
    let view = app.host.read();
    let found = view.query_providers(&query)?;
    let found = page.of(&found)?;
    let last_modified = found.iter().map(|p| p.row.updated_at).max();
    let infos: Vec<ProviderInfo> = found.iter().map(|p| view.provider_info(p)).collect();
    let entries = infos.iter().zip(found).map(|(info, provider)| {
        let mut entry = serialize(ctx.version, info);
        if page.with_usages {
            let usages = view.provider_usages(provider);
            entry.usages = Some(usages.iter().map(|(c, n)| (c.as_str(), *n)).collect());
            let (pending, _) = view.provider_pending(provider.id(), now);
            entry.pending = Some(wire::claims::by_name(&pending));
        }
        entry
    });
    let body = wire::ProviderList {
        resource_providers: entries.collect(),
    };
    // A provider is about 740 bytes at 1.39: a long listing is written into a buffer
    // of about its size rather than grown by doubling and copying.
    let mut bytes = Vec::with_capacity(64 + 768 * infos.len());
    if serde_json::to_writer(&mut bytes, &body).is_err() {
        bytes.clear();
    }
    let response = http::json_bytes(StatusCode::OK, bytes);
    Ok(ctx.cached(response, last_modified.unwrap_or(now)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn links_by_microversion() {
        let info = ProviderInfo {
            uuid: Uuid::from_u128(1),
            name: "n".into(),
            generation: 3,
            parent_uuid: None,
            root_uuid: Uuid::from_u128(1),
            created_at: 0,
            updated_at: 0,
        };
        for (v, links, keys) in [
            (0, 3, 4),
            (1, 4, 4),
            (6, 5, 4),
            (11, 6, 4),
            (14, 6, 6),
            (39, 6, 6),
        ] {
            let body = serde_json::to_value(serialize(Version(v), &info)).unwrap();
            assert_eq!(body["links"].as_array().unwrap().len(), links, "1.{v}");
            assert_eq!(body.as_object().unwrap().len(), keys, "1.{v}");
        }
        let body = serde_json::to_value(serialize(Version(14), &info)).unwrap();
        assert_eq!(body["parent_provider_uuid"], Value::Null);
        assert_eq!(
            body["root_provider_uuid"],
            json!(Uuid::from_u128(1).to_string())
        );
    }
}
