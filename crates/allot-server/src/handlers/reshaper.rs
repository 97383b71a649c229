//! `POST /reshaper` (1.30): replace the inventories of several providers and the
//! allocations of several consumers at once, all or nothing.
//!
//! The rule and its messages are the core's (`allot_core::ops::reshaper`, which runs
//! the one allocation rule with the reshaper's wording); here are the order of
//! Placement's checks (microversion, content type, policy, schema), the body, and the
//! one refusal with its own error code (a provider named for inventories that does
//! not exist).
//!
//! The body is read by `crate::request::reshaper`.

use allot_core::ops::reshaper::MissingProvider;
use allot_store::WriteKind;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;

use crate::context::Ctx;
use crate::error::{ApiError, ApiResult};
use crate::policy::{authorize, Action};
use crate::request::reshaper::Reshape;
use crate::request::JsonBody;
use crate::{http, AppState};

const RESHAPE: Action = Action::Reshape;

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new().route("/reshaper", post(reshape))
}

/// `POST /reshaper`.
pub async fn reshape(ctx: Ctx, State(app): State<AppState>, body: JsonBody) -> ApiResult {
    ctx.require(30)?;
    body.require_json()?;
    authorize(&ctx, app.config.settings.policy, RESHAPE)?;
    let Reshape {
        providers,
        consumers,
    } = Reshape::read(&body, ctx.version.0)?;
    let answer = app
        .write(WriteKind::Reshape, move |view, now| {
            view.reshape(&providers, &consumers, now)
        })
        .await?;
    if let Err(MissingProvider(message)) = answer {
        return Err(ApiError::provider_not_found(message));
    }
    Ok(http::empty(StatusCode::NO_CONTENT))
}
