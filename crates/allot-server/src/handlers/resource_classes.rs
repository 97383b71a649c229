//! `/resource_classes`: the standard classes and custom ones (1.2), and the bodiless
//! create-or-ensure PUT of 1.7; and `/resource_classes/{name}/metadata`, the classes'
//! metadata, an allot extension available at every microversion (it is not
//! Placement's, so no Placement microversion says when it appeared).

use allot_core::ops::classes::Ensured;
use allot_core::ResourceClass;
use allot_store::WriteKind;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;

use crate::context::Ctx;
use crate::error::{ApiError, ApiResult};
use crate::policy::{authorize, Action};
use crate::request::classes::{
    class_in_path, custom_class, custom_class_in_path, metadata, with_metadata,
};
use crate::request::JsonBody;
use crate::{http, wire, AppState};

fn url(name: &str) -> String {
    format!("/resource_classes/{name}")
}

fn serialize(name: &str) -> wire::ResourceClassBody<'_> {
    wire::ResourceClassBody::new(name, url(name))
}

/// `GET /resource_classes`, with `?with_metadata=true` each class's metadata.
pub async fn list(ctx: Ctx, State(app): State<AppState>, RawQuery(raw): RawQuery) -> ApiResult {
    ctx.require(2)?;
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::ClassesList)?;
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
pub async fn create(ctx: Ctx, State(app): State<AppState>, body: JsonBody) -> ApiResult {
    ctx.require(2)?;
    // Placement parses the body before the policy check and reads it after.
    let value = body.value()?;
    authorize(&ctx, app.config.settings.policy, Action::ClassesCreate)?;
    let class = custom_class(value)?;
    let location = url(class.as_str());
    app.write(WriteKind::Class, move |view, now| {
        view.create_class(class, now)
    })
    .await?;
    Ok(http::location(http::empty(StatusCode::CREATED), &location))
}

/// `GET /resource_classes/{name}`.
pub async fn show(ctx: Ctx, State(app): State<AppState>, Path(name): Path<String>) -> ApiResult {
    ctx.require(2)?;
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::ClassesShow)?;
    let last_modified = {
        let view = app.host.read();
        // Text that is no class name names no class.
        let Some(class) = ResourceClass::parse(&name).filter(|c| view.class_exists(c)) else {
            return Err(ApiError::not_found(format!(
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
    body: JsonBody,
) -> ApiResult {
    ctx.require(2)?;
    if ctx.version.at_least(7) {
        authorize(&ctx, app.config.settings.policy, Action::ClassesUpdate)?;
        let class = custom_class_in_path(&name)?;
        let ensured = app
            .write(WriteKind::Class, move |view, now| {
                view.ensure_class(class, now)
            })
            .await?;
        let status = match ensured {
            Ensured::Created => StatusCode::CREATED,
            Ensured::Existed => StatusCode::NO_CONTENT,
        };
        return Ok(http::location(http::empty(status), &url(&name)));
    }
    let value = body.value()?;
    authorize(&ctx, app.config.settings.policy, Action::ClassesUpdate)?;
    let new = custom_class(value)?;
    let old = class_in_path(&name)?;
    let renamed = app
        .write(WriteKind::Class, move |view, now| {
            view.rename_class(&old, new, now)
        })
        .await?;
    Ok(http::json(StatusCode::OK, &serialize(renamed.as_str())))
}

/// `DELETE /resource_classes/{name}`.
pub async fn delete(ctx: Ctx, State(app): State<AppState>, Path(name): Path<String>) -> ApiResult {
    ctx.require(2)?;
    authorize(&ctx, app.config.settings.policy, Action::ClassesDelete)?;
    let name = class_in_path(&name)?;
    app.write(WriteKind::Class, move |view, _| view.delete_class(&name))
        .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

/// `GET /resource_classes/{name}/metadata` (an allot extension, every microversion).
pub async fn show_metadata(
    ctx: Ctx,
    State(app): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::ClassMetadataShow)?;
    let class = class_in_path(&name)?;
    let Some(metadata) = app.host.read().class_metadata(&class) else {
        return Err(ApiError::not_found(format!(
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
    body: JsonBody,
) -> ApiResult {
    let value = body.value()?;
    authorize(
        &ctx,
        app.config.settings.policy,
        Action::ClassMetadataUpdate,
    )?;
    let metadata = metadata(value)?;
    let class = class_in_path(&name)?;
    let set = app
        .write(WriteKind::Class, move |view, _| {
            view.set_class_metadata(&class, metadata)
        })
        .await?;
    Ok(http::json(
        StatusCode::OK,
        &wire::ClassMetadataBody::from(set),
    ))
}
