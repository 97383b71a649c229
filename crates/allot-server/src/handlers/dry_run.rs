//! `POST /dry_run`, an allot extension (issue 47) available at every microversion:
//! what an inventory write, a reshape or a provider delete would answer, and what it
//! would leave over capacity, with nothing changed.
//!
//! A route of its own, so that no Placement write route changes meaning (a flag on a
//! Placement route would do the real write on Placement, or on an older allot). The
//! write goes through its own handler's checks and reader (`checked_*` in
//! `handlers::inventories`, `handlers::reshaper`, `handlers::providers`), at the dry
//! run's own microversion and for its caller, and its plan, the very function the
//! writer would run, runs on the current version of the view at the host's `now`,
//! never through `AppState::write`. What it would leave over capacity is the core's
//! `State::left_over_capacity`. On several nodes the dry run is a read answered where
//! it arrives (`forward::POSTED_READS`), on that node's view, which holds at least the
//! writes this node forwarded; the writer's batch may still differ by what is queued
//! beside the real write, which no dry run can know.

use allot_client::dry_run::{DryRun as Answer, Holder, OverCapacity, ProviderName};
use allot_core::{Change, State as View, Timestamp};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use serde_json::Value;

use super::{inventories, providers, reshaper, CheckedPlan};
use crate::context::Ctx;
use crate::error::{ApiError, ApiResult, ErrorContext, ErrorFormat, ErrorInfo};
use crate::policy::{authorize, Action};
use crate::request::dry_run::{DryRun, Write};
use crate::request::path::{ProviderBody, ProviderPath};
use crate::request::JsonBody;
use crate::{http, AppState};

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new().route("/dry_run", post(dry_run))
}

/// A write's plan as a dry run runs it: the changes it would make, or the error the
/// write would answer.
type Trial = Box<dyn FnOnce(&View, Timestamp) -> Result<Vec<Change>, ApiError> + Send>;

/// A write checked and read: the status it answers when it succeeds, and its plan.
struct Checked {
    status: StatusCode,
    plan: Trial,
}

impl Checked {
    /// A plan whose answer is only the write's success.
    fn of<T: 'static>(status: StatusCode, plan: CheckedPlan<T>) -> Self {
        Checked {
            status,
            plan: Box::new(move |view, now| Ok(plan(view, now)?.1)),
        }
    }
}

/// The write's own checks and reading, in its own handler's order, as its handler
/// runs them.
fn check(ctx: &Ctx, app: &AppState, write: &Write, body: &JsonBody) -> Result<Checked, ApiError> {
    let sent = |uuid: &str| ProviderBody {
        path: ProviderPath::new(uuid),
        body: body.clone(),
    };
    Ok(match write {
        Write::ReplaceInventories(uuid) => {
            let (_, plan) = inventories::checked_replace_all(ctx, app, &sent(uuid))?;
            Checked::of(StatusCode::OK, plan)
        }
        Write::AddInventory(uuid) => {
            let (_, _, plan) = inventories::checked_create(ctx, app, &sent(uuid))?;
            Checked::of(StatusCode::CREATED, plan)
        }
        Write::DeleteInventories(uuid) => {
            let plan = inventories::checked_delete_all(ctx, app, &ProviderPath::new(uuid))?;
            Checked::of(StatusCode::NO_CONTENT, plan)
        }
        Write::UpdateInventory(uuid, class) => {
            let (_, plan) = inventories::checked_update(ctx, app, class, &sent(uuid))?;
            Checked::of(StatusCode::OK, plan)
        }
        Write::DeleteInventory(uuid, class) => {
            let plan = inventories::checked_delete(ctx, app, &ProviderPath::new(uuid), class)?;
            Checked::of(StatusCode::NO_CONTENT, plan)
        }
        Write::DeleteProvider(uuid) => {
            let plan = providers::checked_delete(ctx, app, &ProviderPath::new(uuid))?;
            Checked::of(StatusCode::NO_CONTENT, plan)
        }
        Write::Reshape => {
            let plan = reshaper::checked_reshape(ctx, app, body)?;
            Checked {
                status: StatusCode::NO_CONTENT,
                plan: Box::new(move |view, now| {
                    let (answer, changes) = plan(view, now)?;
                    reshaped_or(answer, changes)
                }),
            }
        }
    })
}

/// A reshape's changes, or the refusal its answer carries.
fn reshaped_or(
    answer: Result<(), allot_core::ops::reshaper::MissingProvider>,
    changes: Vec<Change>,
) -> Result<Vec<Change>, ApiError> {
    reshaper::reshaped(answer).map(|()| changes)
}

/// `POST /dry_run`: 200 with what the write would answer (`status`, and `errors` when
/// refused) and what it would leave over capacity; 400 for a body that names no write
/// a dry run takes.
pub async fn dry_run(ctx: Ctx, State(app): State<AppState>, body: JsonBody) -> ApiResult {
    ctx.require_json_accept()?;
    body.require_json()?;
    authorize(&ctx, app.config.settings.policy, Action::DryRun)?;
    let asked = DryRun::read(&body)?;
    let now = app.host.now();
    let outcome = check(&ctx, &app, &asked.write, &asked.body).and_then(|checked| {
        let view = app.host.read();
        let changes = (checked.plan)(&view, now)?;
        Ok((checked.status, view.left_over_capacity(&changes, now)))
    });
    let answer = match outcome {
        Ok((status, over)) => Answer {
            errors: Vec::new(),
            over_capacity: over.iter().map(over_capacity).collect(),
            status: status.as_u16(),
        },
        Err(refused) => Answer {
            status: refused.status.as_u16(),
            errors: envelope_errors(&ctx, &asked.method, refused),
            over_capacity: Vec::new(),
        },
    };
    Ok(http::json(StatusCode::OK, &answer))
}

/// The errors of the envelope the write would answer with, as `error::render` writes
/// it for this request (its request id, its microversion's `code`).
fn envelope_errors(ctx: &Ctx, method: &str, refused: ApiError) -> Vec<Value> {
    let (status, info): (StatusCode, ErrorInfo) = refused.into_parts();
    let request = ErrorContext {
        method,
        request_id: &ctx.request_id,
        version: Some(ctx.version),
        format: ErrorFormat::Json,
    };
    let (_, bytes) = crate::error::body(status, &info, &request);
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(mut envelope)) => match envelope.remove("errors") {
            Some(Value::Array(errors)) => errors,
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// One class over capacity as the answer gives it.
fn over_capacity(o: &allot_core::over_capacity::OverCapacity) -> OverCapacity {
    OverCapacity {
        // Saturated: only a ratio near f32's largest makes a capacity past i64.
        capacity: i64::try_from(o.capacity.clamp(i64::MIN.into(), i64::MAX.into()))
            .unwrap_or_default(),
        consumers: o
            .consumers
            .iter()
            .map(|&(consumer_uuid, used)| Holder {
                consumer_uuid,
                used,
            })
            .collect(),
        over: o.over,
        resource_class: o.class.to_string(),
        resource_provider: ProviderName {
            name: o.name.clone(),
            uuid: o.provider,
        },
        used: o.used,
    }
}
