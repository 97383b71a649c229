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

/// A reshape checked and read, in Placement's order, ready for the writer: what the
/// handler hands to `AppState::write`, and what a dry run (`crate::handlers::dry_run`)
/// plans on a copy of the view. Its answer goes through [`reshaped`].
pub(crate) type ReshapePlan = super::CheckedPlan<Result<(), MissingProvider>>;

/// `POST /reshaper`'s checks and body: the plan.
pub(crate) fn checked_reshape(
    ctx: &Ctx,
    app: &AppState,
    body: &JsonBody,
) -> Result<ReshapePlan, ApiError> {
    ctx.require(30)?;
    body.require_json()?;
    authorize(ctx, app.config.settings.policy, RESHAPE)?;
    let Reshape {
        providers,
        consumers,
    } = Reshape::read(body, ctx.version.0)?;
    Ok(Box::new(move |view, now| {
        view.reshape(&providers, &consumers, now)
    }))
}

/// A reshape's answer: the one refusal the plan answers rather than errs with (a
/// provider named for inventories that does not exist) has its own error code.
pub(crate) fn reshaped(answer: Result<(), MissingProvider>) -> Result<(), ApiError> {
    answer.map_err(|MissingProvider(message)| ApiError::provider_not_found(message))
}

/// `POST /reshaper`.
pub async fn reshape(ctx: Ctx, State(app): State<AppState>, body: JsonBody) -> ApiResult {
    let plan = checked_reshape(&ctx, &app, &body)?;
    reshaped(app.write(WriteKind::Reshape, plan).await?)?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}
