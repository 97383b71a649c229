//! `/traits` (1.6): standard and custom traits.

use allot_core::ops::traits::{parse_custom_trait, Ensured};
use allot_core::TraitName;
use allot_store::WriteKind;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;

use crate::context::Ctx;
use crate::error::{ApiError, ApiResult};
use crate::http;
use crate::policy::{authorize, Action};
use crate::request::traits::TraitsQuery;
use crate::{wire, AppState};

/// `GET /traits?name=in:A,B|startswith:P&associated=true|false`.
pub async fn list(ctx: Ctx, State(app): State<AppState>, RawQuery(raw): RawQuery) -> ApiResult {
    ctx.require(6)?;
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::TraitsList)?;
    let TraitsQuery { name, associated } = TraitsQuery::read(raw.as_deref())?;
    let (names, last_modified) = {
        let view = app.host.read();
        let used: Option<std::collections::HashSet<&str>> = associated.map(|_| {
            view.providers()
                .flat_map(|p| p.traits.iter().map(|t| t.as_str()))
                .collect()
        });
        let names: Vec<String> = view
            .trait_names()
            .into_iter()
            .filter(|n| name.as_ref().is_none_or(|f| f.admits(n)))
            .filter(|n| match (&used, associated) {
                (Some(used), Some(want)) => used.contains(n) == want,
                _ => true,
            })
            .map(str::to_owned)
            .collect();
        (names, app.host.now())
    };
    let body = wire::TraitList {
        traits: names.iter().map(String::as_str).collect(),
    };
    let response = http::json(StatusCode::OK, &body);
    Ok(ctx.cached(response, last_modified))
}

/// `GET /traits/{name}`: 204 if it exists.
pub async fn show(ctx: Ctx, State(app): State<AppState>, Path(name): Path<String>) -> ApiResult {
    ctx.require(6)?;
    authorize(&ctx, app.config.settings.policy, Action::TraitsShow)?;
    let created = {
        let view = app.host.read();
        // Text that is no trait name names no trait.
        let Some(found) = TraitName::parse(&name).filter(|t| view.trait_exists(t)) else {
            return Err(ApiError::not_found(format!("No such trait(s): {name}.")));
        };
        view.custom_trait(&found).map(|t| t.created_at)
    };
    let response = http::empty(StatusCode::NO_CONTENT);
    Ok(ctx.cached(response, created.unwrap_or_else(|| app.host.now())))
}

/// `PUT /traits/{name}`: create a custom trait (201) or confirm it exists (204).
pub async fn put(ctx: Ctx, State(app): State<AppState>, Path(name): Path<String>) -> ApiResult {
    ctx.require(6)?;
    authorize(&ctx, app.config.settings.policy, Action::TraitsUpdate)?;
    let parsed = parse_custom_trait(&name)?;
    let created_trait = parsed.clone();
    let ensured = app
        .write(WriteKind::Trait, move |view, now| {
            view.ensure_trait(parsed, now)
        })
        .await?;
    let status = match ensured {
        Ensured::Created => StatusCode::CREATED,
        Ensured::Existed => StatusCode::NO_CONTENT,
    };
    let response = http::location(http::empty(status), &format!("/traits/{name}"));
    Ok(if ctx.wants_cache_headers() {
        let created = app
            .host
            .read()
            .custom_trait(&created_trait)
            .map(|t| t.created_at);
        http::cache_headers(response, created.unwrap_or_else(|| app.host.now()))
    } else {
        response
    })
}

/// `DELETE /traits/{name}`.
pub async fn delete(ctx: Ctx, State(app): State<AppState>, Path(name): Path<String>) -> ApiResult {
    ctx.require(6)?;
    authorize(&ctx, app.config.settings.policy, Action::TraitsDelete)?;
    // A name that is not well formed names no trait: the same 404 as an unknown one.
    let name = TraitName::parse(&name)
        .ok_or_else(|| ApiError::not_found(format!("No such trait(s): {name}.")))?;
    app.write(WriteKind::Trait, move |view, _| view.delete_trait(&name))
        .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}
