//! `/resource_classes`: the standard classes and custom ones (1.2), and the bodiless
//! create-or-ensure PUT of 1.7; and `/resource_classes/{name}/metadata`, the classes'
//! metadata, an allot extension available at every microversion (it is not
//! Placement's, so no Placement microversion says when it appeared).

use allot_core::ops::classes::{parse_custom_class, Ensured};
use allot_core::{ClassMetadata, ResourceClass};
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::json;

use crate::context::Ctx;
use crate::error::ApiResult;
use crate::policy::{authorize, Action};
use crate::{http, schemas, wire, AppState};

#[derive(Deserialize)]
struct NameBody {
    name: String,
}

/// The body of `PUT /resource_classes/{name}/metadata`: a field absent or null is
/// unset.
#[derive(Deserialize)]
struct MetadataBody {
    #[serde(default)]
    units: Option<String>,
    #[serde(default)]
    display_name: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

/// A class named in a path. A name that is not well formed names no class, so it gets
/// the same 404 as an unknown one.
fn class_in_path(name: &str) -> Result<ResourceClass, crate::ApiError> {
    ResourceClass::parse(name)
        .ok_or_else(|| crate::ApiError::not_found(format!("No such resource class {name}.")))
}

fn url(name: &str) -> String {
    format!("/resource_classes/{name}")
}

fn serialize(name: &str) -> wire::ResourceClassBody<'_> {
    wire::ResourceClassBody::new(name, url(name))
}

/// Reads `with_metadata` (an allot extension of the list): absent or `false` lists as
/// Placement does, `true` adds each class's metadata. Placement ignores unknown
/// parameters here, so nothing else is refused.
fn with_metadata(raw: Option<&str>) -> Result<bool, crate::ApiError> {
    match http::Query::parse(raw).last("with_metadata") {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(crate::ApiError::bad_request(format!(
            "Invalid value for with_metadata: '{other}'. It must be 'true' or 'false'."
        ))),
    }
}

/// `GET /resource_classes`, with `?with_metadata=true` each class's metadata.
pub async fn list(ctx: Ctx, State(app): State<AppState>, RawQuery(raw): RawQuery) -> ApiResult {
    ctx.require(2)?;
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.policy, Action::ClassesList)?;
    let with_metadata = with_metadata(raw.as_deref())?;
    let response = {
        let view = app.host.read();
        let body = wire::ResourceClassList {
            resource_classes: view
                .class_names()
                .map(|name| {
                    let mut body = serialize(name);
                    if with_metadata {
                        // Trusted: the view's class names are well formed.
                        let class = ResourceClass::new_unchecked(name);
                        body.metadata = view.class_metadata(&class).map(Into::into);
                    }
                    body
                })
                .collect(),
        };
        http::json(StatusCode::OK, &body)
    };
    // The standard classes have no time of their own: like Placement, say "now".
    Ok(ctx.cached(response, app.host.now()))
}

/// `POST /resource_classes`.
pub async fn create(
    ctx: Ctx,
    State(app): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    ctx.require(2)?;
    let _ = http::json_value(&headers, &body)?;
    authorize(&ctx, app.config.policy, Action::ClassesCreate)?;
    let input: NameBody = http::json_body(&headers, &body, &schemas::resource_class())?;
    let name = parse_custom_class(&input.name)?;
    app.write(move |view, now| view.create_class(name, now))
        .await?;
    Ok(http::location(
        http::empty(StatusCode::CREATED),
        &url(&input.name),
    ))
}

/// `GET /resource_classes/{name}`.
pub async fn show(ctx: Ctx, State(app): State<AppState>, Path(name): Path<String>) -> ApiResult {
    ctx.require(2)?;
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.policy, Action::ClassesShow)?;
    let last_modified = {
        let view = app.host.read();
        // Text that is no class name names no class.
        let Some(class) = ResourceClass::parse(&name).filter(|c| view.class_exists(c)) else {
            return Err(crate::ApiError::not_found(format!(
                "No such resource class {name}."
            )));
        };
        view.custom_class(&class).map(|c| c.updated_at)
    };
    let response = http::json(StatusCode::OK, &serialize(&name));
    Ok(ctx.cached(response, last_modified.unwrap_or_else(|| app.host.now())))
}

/// `PUT /resource_classes/{name}`: a rename with a body before 1.7, a bodiless
/// create-if-missing from 1.7.
pub async fn update(
    ctx: Ctx,
    State(app): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    ctx.require(2)?;
    if ctx.version.at_least(7) {
        authorize(&ctx, app.config.policy, Action::ClassesUpdate)?;
        // Validate the name as if it came in a body, for the same message.
        crate::schema::validate(&json!({"name": name}), &schemas::resource_class())
            .map_err(|e| crate::ApiError::bad_request(format!("JSON does not validate: {e}")))?;
        let class = parse_custom_class(&name)?;
        let ensured = app
            .write(move |view, now| view.ensure_class(class, now))
            .await?;
        let status = match ensured {
            Ensured::Created => StatusCode::CREATED,
            Ensured::Existed => StatusCode::NO_CONTENT,
        };
        return Ok(http::location(http::empty(status), &url(&name)));
    }
    let _ = http::json_value(&headers, &body)?;
    authorize(&ctx, app.config.policy, Action::ClassesUpdate)?;
    let input: NameBody = http::json_body(&headers, &body, &schemas::resource_class())?;
    let new = parse_custom_class(&input.name)?;
    let old = class_in_path(&name)?;
    let renamed = app
        .write(move |view, now| view.rename_class(&old, new, now))
        .await?;
    Ok(http::json(StatusCode::OK, &serialize(renamed.as_str())))
}

/// `DELETE /resource_classes/{name}`.
pub async fn delete(ctx: Ctx, State(app): State<AppState>, Path(name): Path<String>) -> ApiResult {
    ctx.require(2)?;
    authorize(&ctx, app.config.policy, Action::ClassesDelete)?;
    let name = class_in_path(&name)?;
    app.write(move |view, _| view.delete_class(&name)).await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

/// `GET /resource_classes/{name}/metadata` (an allot extension, every microversion).
pub async fn show_metadata(
    ctx: Ctx,
    State(app): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.policy, Action::ClassMetadataShow)?;
    let class = class_in_path(&name)?;
    let Some(metadata) = app.host.read().class_metadata(&class) else {
        return Err(crate::ApiError::not_found(format!(
            "No such resource class {name}."
        )));
    };
    let body = wire::ClassMetadataBody::from(metadata);
    // Metadata has no time of its own: like a standard class, say "now".
    Ok(ctx.cached(http::json(StatusCode::OK, &body), app.host.now()))
}

/// `PUT /resource_classes/{name}/metadata` (an allot extension, every microversion):
/// replaces a custom class's metadata and answers it; a standard class's is fixed
/// (400).
pub async fn update_metadata(
    ctx: Ctx,
    State(app): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    let _ = http::json_value(&headers, &body)?;
    authorize(&ctx, app.config.policy, Action::ClassMetadataUpdate)?;
    let input: MetadataBody = http::json_body(&headers, &body, &schemas::class_metadata())?;
    let class = class_in_path(&name)?;
    let metadata = ClassMetadata {
        units: input.units,
        display_name: input.display_name,
        description: input.description,
    };
    let set = app
        .write(move |view, _| view.set_class_metadata(&class, metadata))
        .await?;
    Ok(http::json(
        StatusCode::OK,
        &wire::ClassMetadataBody::from(set),
    ))
}
