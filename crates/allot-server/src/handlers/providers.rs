//! `/resource_providers` and `/resource_providers/{uuid}`: create, show, list with
//! filters, update (rename, re-parent) and delete providers.

use allot_core::ops::providers::{ParentChange, ProviderInfo};
use allot_core::query::ProviderQuery;
use allot_core::{ProviderRef, ResourceClass, TraitName, Uuid};
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::context::Ctx;
use crate::error::{ApiError, ApiResult};
use crate::http::{self, Query};
use crate::microversion::Version;
use crate::params::filters::{member_of_filter, required_filter, resources_filter};
use crate::params::{
    invalid_query, is_dashed_uuid, no_provider, require_utf8_query, uuid_like, ProviderPath,
};
use crate::policy::{authorize, Action};
use crate::schema;
use crate::{schemas, wire, AppState};

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/resource_providers", get(list).post(create))
        .route(
            "/resource_providers/{uuid}",
            get(show).put(update).delete(delete),
        )
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
    }
}

/// `GET /resource_providers/{uuid}`.
pub async fn show(ctx: Ctx, State(app): State<AppState>, path: ProviderPath) -> ApiResult {
    // A path that is not UTF-8 is refused before anything else.
    path.raw()?;
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.policy, Action::ProvidersShow)?;
    let info = {
        let view = app.host.read();
        let provider = path.provider(&view, no_provider)?;
        view.provider_info(provider)
    };
    let response = http::json(StatusCode::OK, &serialize(ctx.version, &info));
    Ok(ctx.cached(response, info.updated_at))
}

#[derive(Deserialize)]
struct CreateBody {
    name: String,
    #[serde(default)]
    uuid: Option<String>,
    #[serde(default)]
    parent_provider_uuid: Option<String>,
}

/// `POST /resource_providers`: 201 with only a `location` before 1.20, 200 with the
/// provider from 1.20.
pub async fn create(
    ctx: Ctx,
    State(app): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    http::require_json_content(&headers, &body)?;
    authorize(&ctx, app.config.policy, Action::ProvidersCreate)?;
    let schema = schemas::provider_create(ctx.version.at_least(14));
    let input: CreateBody = http::json_body(&headers, &body, &schema)?;
    // The schema let through only uuids that parse; any spelling is stored in the
    // canonical one.
    let uuid = match input.uuid.as_deref() {
        Some(u) if !u.is_empty() => uuid_like(u)
            .or_else(|| Uuid::try_parse(u).ok())
            .ok_or_else(|| {
                ApiError::bad_request(format!("JSON does not validate: '{u}' is not a 'uuid'"))
            })?,
        _ => Uuid::new_v4(),
    };
    let info = app
        .write(move |view, now| {
            let parent = input
                .parent_provider_uuid
                .as_deref()
                .map(ProviderRef::parse);
            view.create_provider(uuid, &input.name, parent, now)
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
pub async fn update(
    ctx: Ctx,
    State(app): State<AppState>,
    path: ProviderPath,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    path.raw()?;
    http::require_json_content(&headers, &body)?;
    authorize(&ctx, app.config.policy, Action::ProvidersUpdate)?;
    let target = path.provider(&app.host.read(), no_provider)?.uuid();
    let schema = schemas::provider_update(ctx.version.at_least(14));
    let input: Value = http::json_body(&headers, &body, &schema)?;
    let name = input["name"].as_str().unwrap_or_default().to_owned();
    let parent = match input.get("parent_provider_uuid") {
        None => ParentChange::Keep,
        Some(p) => match p.as_str() {
            Some(text) => ParentChange::SetTo(ProviderRef::parse(text)),
            None => ParentChange::Clear,
        },
    };
    let allow_reparenting = ctx.version.at_least(37);
    let (info, previous_update) = app
        .write(move |view, now| {
            view.update_provider(&target, &name, parent, allow_reparenting, now)
        })
        .await?;
    let response = http::json(StatusCode::OK, &serialize(ctx.version, &info));
    Ok(ctx.cached(response, previous_update))
}

/// `DELETE /resource_providers/{uuid}`.
pub async fn delete(ctx: Ctx, State(app): State<AppState>, path: ProviderPath) -> ApiResult {
    path.raw()?;
    authorize(&ctx, app.config.policy, Action::ProvidersDelete)?;
    let target = path.uuid(|uuid| format!("{} for delete", no_provider(uuid)))?;
    app.write(move |view, now| view.delete_provider(&target, now))
        .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

/// `GET /resource_providers?name=&uuid=&member_of=&resources=&in_tree=&required=`.
pub async fn list(ctx: Ctx, State(app): State<AppState>, RawQuery(raw): RawQuery) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.policy, Action::ProvidersList)?;
    let query = ProviderQuery {
        now: app.host.now(),
        ..list_query(ctx.version, raw.as_deref())?
    };
    let (infos, last_modified) = {
        let view = app.host.read();
        let found = view.query_providers(&query)?;
        let last_modified = found.iter().map(|p| p.row.updated_at).max();
        let infos: Vec<ProviderInfo> = found.iter().map(|p| view.provider_info(p)).collect();
        (infos, last_modified)
    };
    let body = wire::ProviderList {
        resource_providers: infos.iter().map(|i| serialize(ctx.version, i)).collect(),
    };
    // A provider is about 740 bytes at 1.39: a long listing is written into a buffer
    // of about its size rather than grown by doubling and copying.
    let mut bytes = Vec::with_capacity(64 + 768 * infos.len());
    if serde_json::to_writer(&mut bytes, &body).is_err() {
        bytes.clear();
    }
    let response = http::json_bytes(StatusCode::OK, bytes);
    Ok(ctx.cached(response, last_modified.unwrap_or_else(|| app.host.now())))
}

/// Turns the query string of a provider listing into filters, with Placement's
/// checks and messages at each microversion.
fn list_query(version: Version, raw: Option<&str>) -> Result<ProviderQuery, ApiError> {
    require_utf8_query(raw.unwrap_or(""))?;
    let query = &Query::parse(raw);
    // Single-valued parameters take their last value, as Placement's do.
    let mut values = Map::new();
    for (key, value) in &query.0 {
        values.insert(key.clone(), Value::String(value.clone()));
    }
    let values = Value::Object(values);
    schema::validate(&values, &schemas::provider_list_query(version.0)).map_err(invalid_query)?;
    let last = |key: &str| values.get(key).and_then(Value::as_str).map(str::to_owned);
    for key in ["uuid", "in_tree"] {
        if let Some(value) = last(key).filter(|v| !is_dashed_uuid(v)) {
            // The same words as a schema failure, which is what Placement reports.
            let repr = schema::py_repr(&json!(value));
            return Err(invalid_query(format!(
                "{repr} is not a 'uuid'\n\nFailed validating 'format' in \
                 schema['properties']['{key}']:\n    {{'type': 'string', 'format': 'uuid'}}\n\n\
                 On instance['{key}']:\n    {repr}"
            )));
        }
    }

    let mut filters = ProviderQuery::default();
    let member_of = query.all("member_of");
    if !member_of.is_empty() {
        (filters.member_of, filters.forbidden_aggregates) = member_of_filter(version, &member_of)?;
    }
    let required = query.all("required");
    if !required.is_empty() {
        // Any text is a trait to look up: the core answers text that is no trait name
        // as an unknown trait, at the same step.
        let (any_of, forbidden) = required_filter(version, &required)?;
        filters.required_traits = any_of
            .iter()
            .map(|group| group.iter().map(|t| TraitName::requested(t)).collect())
            .collect();
        filters.forbidden_traits = forbidden.iter().map(|t| TraitName::requested(t)).collect();
    }
    filters.name = last("name");
    filters.uuid = last("uuid").as_deref().map(ProviderRef::parse);
    filters.in_tree = last("in_tree").as_deref().map(ProviderRef::parse);
    if let Some(resources) = last("resources") {
        filters.resources = resources_filter(&resources)?
            .iter()
            .map(|(class, amount)| (ResourceClass::requested(class), *amount))
            .collect();
    }
    Ok(filters)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(e: ApiError) -> String {
        e.message
    }

    #[test]
    fn query_by_microversion() {
        let q = |v: u16, raw: &str| list_query(Version(v), Some(raw));
        assert!(message(q(17, "required=A").unwrap_err())
            .contains("Additional properties are not allowed ('required' was unexpected)"));
        assert!(message(q(2, "member_of=x").unwrap_err())
            .contains("Additional properties are not allowed"));
        assert!(q(3, "member_of=83a3d69d-8920-48e2-8914-cadfd8fa2f91").is_ok());
        assert!(message(q(39, "spam=eggs").unwrap_err())
            .starts_with("Invalid query string parameters: "));
        assert!(message(q(39, "uuid=spameggs").unwrap_err()).contains("'spameggs' is not a 'uuid'"));
        assert!(
            message(q(39, "in_tree=2290d4af9e6e400b9d651ee01376f71a").unwrap_err())
                .contains("is not a 'uuid'")
        );
        let f = q(
            39,
            "name=a&name=b&resources=VCPU:1&in_tree=2290d4af-9e6e-400b-9d65-1ee01376f71a",
        )
        .unwrap();
        assert_eq!(f.name.as_deref(), Some("b"));
        assert_eq!(f.resources, vec![(ResourceClass::requested("VCPU"), 1)]);
        assert_eq!(
            f.in_tree.and_then(|t| t.uuid()).map(|u| u.to_string()),
            Some("2290d4af-9e6e-400b-9d65-1ee01376f71a".to_owned())
        );
    }

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
