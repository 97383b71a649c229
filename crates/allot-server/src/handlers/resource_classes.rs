//! `/resource_classes`: the standard classes and custom ones (1.2), and the bodiless
//! create-or-ensure PUT of 1.7.

use allot_core::ops::classes::Ensured;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::json;

use crate::context::Ctx;
use crate::error::{codes, ApiError, ApiResult};
use crate::policy::{authorize, Action};
use crate::{http, schemas, wire, AppState};

#[derive(Deserialize)]
struct NameBody {
    name: String,
}

fn url(name: &str) -> String {
    format!("/resource_classes/{name}")
}

fn serialize(name: &str) -> wire::ResourceClassBody<'_> {
    wire::ResourceClassBody::new(name, url(name))
}

/// Placement marks a taken provider name `placement.duplicate_name`, but answers a
/// taken class name (create or rename) with no code of its own; clients branch on it.
fn class_name_taken(e: ApiError) -> ApiError {
    if e.code == codes::DUPLICATE_NAME {
        e.with_code(codes::UNDEFINED)
    } else {
        e
    }
}

/// `GET /resource_classes`.
pub async fn list(ctx: Ctx, State(app): State<AppState>) -> ApiResult {
    ctx.require(2)?;
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.policy, Action::ClassesList)?;
    let response = {
        let view = app.host.read();
        let body = wire::ResourceClassList {
            resource_classes: view.class_names().map(serialize).collect(),
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
    let name = input.name.clone();
    app.write(move |view, now| view.create_class(&name, now))
        .await
        .map_err(class_name_taken)?;
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
        if !view.class_exists(&name) {
            return Err(crate::ApiError::not_found(format!(
                "No such resource class {name}."
            )));
        }
        view.custom_class(&name).map(|c| c.updated_at)
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
        let n = name.clone();
        let ensured = app
            .write(move |view, now| view.ensure_class(&n, now))
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
    let renamed = app
        .write(move |view, now| view.rename_class(&name, &input.name, now))
        .await
        .map_err(class_name_taken)?;
    Ok(http::json(StatusCode::OK, &serialize(renamed.as_str())))
}

/// `DELETE /resource_classes/{name}`.
pub async fn delete(ctx: Ctx, State(app): State<AppState>, Path(name): Path<String>) -> ApiResult {
    ctx.require(2)?;
    authorize(&ctx, app.config.policy, Action::ClassesDelete)?;
    app.write(move |view, _| view.delete_class(&name)).await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}
