//! `/resource_providers/{uuid}/inventories`: a provider's inventories, listed and
//! replaced as a whole (`DELETE` from 1.5), and one class's at a time.
//!
//! The rules and their messages live in `allot_core::ops::inventories`; here are the
//! HTTP concerns: the order of Placement's checks, the bodies, and the headers.

use allot_core::ops::inventories::ReservedRule;
use allot_core::ops::Plan;
use allot_core::{Inventory, ResourceClass, State as View, Timestamp, Uuid};
use allot_store::WriteKind;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::get;
use axum::Router;

use crate::context::Ctx;
use crate::error::{ApiError, ApiResult};
use crate::policy::{authorize, Action};
use crate::request::inventories::{AllInventories, InventoryUpdate, NewInventory};
use crate::request::path::{no_provider, ProviderBody, ProviderPath};
use crate::{http, wire, AppState};

const LIST: Action = Action::InventoriesList;
const CREATE: Action = Action::InventoriesCreate;
const SHOW: Action = Action::InventoriesShow;
const UPDATE: Action = Action::InventoriesUpdate;
const DELETE: Action = Action::InventoriesDelete;

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/resource_providers/{uuid}/inventories",
            get(list).post(create).put(replace_all).delete(delete_all),
        )
        .route(
            "/resource_providers/{uuid}/inventories/{resource_class}",
            get(show).put(update).delete(delete),
        )
}

/// One inventory; like Placement, the generation is left out when it is 0.
fn one_body(inv: &Inventory, generation: u64) -> wire::InventoryBody {
    wire::InventoryBody::new(inv, (generation != 0).then_some(generation))
}

fn all_body<'a>(
    inventories: impl Iterator<Item = (&'a str, &'a Inventory)>,
    generation: u64,
) -> wire::InventoryList<'a> {
    wire::InventoryList {
        inventories: inventories
            .map(|(class, inv)| (class, inv.into()))
            .collect(),
        resource_provider_generation: generation,
    }
}

/// Adds the 1.15 caching headers. `last_modified` is None for an empty list, which
/// Placement answers without `last-modified`.
fn cached(ctx: &Ctx, response: Response, last_modified: Option<Timestamp>) -> Response {
    if !ctx.wants_cache_headers() {
        return response;
    }
    match last_modified {
        Some(t) => ctx.cached(response, t),
        None => {
            let mut response = response;
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            response
        }
    }
}

/// The GETs wrap the lookup's message in their own.
fn no_provider_get(uuid: &str) -> String {
    format!(
        "No resource provider with uuid {uuid} found : {}",
        no_provider(uuid)
    )
}

/// What every inventory write checks before it reads its body, in Placement's order:
/// the content type, the policy, then that the provider exists. Returns its uuid.
fn before_body(
    ctx: &Ctx,
    app: &AppState,
    sent: &ProviderBody,
    action: Action,
) -> Result<Uuid, ApiError> {
    sent.body.require_json()?;
    authorize(ctx, app.config.settings.policy, action)?;
    Ok(sent.path.provider(&app.host.read(), no_provider)?.uuid())
}

/// Runs an inventory write, which answers the provider's new generation; returns it
/// with the time of the write (what the answer's `last-modified` says).
async fn write(
    app: &AppState,
    plan: impl FnOnce(&View, Timestamp) -> Plan<u64> + Send + 'static,
) -> Result<(u64, Timestamp), ApiError> {
    app.write(WriteKind::Inventory, move |view, now| {
        let (generation, changes) = plan(view, now)?;
        Ok(((generation, now), changes))
    })
    .await
}

fn rule(ctx: &Ctx) -> ReservedRule {
    ReservedRule::for_minor(ctx.version.0)
}

/// `GET /resource_providers/{uuid}/inventories`.
pub async fn list(ctx: Ctx, State(app): State<AppState>, path: ProviderPath) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, LIST)?;
    let (response, last_modified) = {
        let view = app.host.read();
        let p = path.provider(&view, no_provider_get)?;
        let body = all_body(
            p.inventories.iter().map(|(c, i)| (c.as_str(), i)),
            p.row.generation,
        );
        // Inventories keep no time of their own; the provider's last change covers them.
        (
            http::json(StatusCode::OK, &body),
            (!p.inventories.is_empty()).then_some(p.row.updated_at),
        )
    };
    Ok(cached(&ctx, response, last_modified))
}

/// `GET /resource_providers/{uuid}/inventories/{resource_class}`.
pub async fn show(
    ctx: Ctx,
    State(app): State<AppState>,
    path: ProviderPath,
    Path((_, class)): Path<(String, String)>,
) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, SHOW)?;
    let (body, last_modified) = {
        let view = app.host.read();
        let p = path.provider(&view, no_provider_get)?;
        let inv = p.inventories.get(class.as_str()).ok_or_else(|| {
            ApiError::not_found(format!("No inventory of class {class} for {}", p.uuid()))
        })?;
        (one_body(inv, p.row.generation), p.row.updated_at)
    };
    Ok(cached(
        &ctx,
        http::json(StatusCode::OK, &body),
        Some(last_modified),
    ))
}

/// An inventory write checked and read, in Placement's order, ready for the writer:
/// what the handler hands to `AppState::write`, and what a dry run
/// (`crate::handlers::dry_run`) plans on a copy of the view, so that both refuse
/// alike.
pub(crate) type InventoryPlan = super::CheckedPlan<u64>;

/// `POST`'s checks and body: the new inventory's URL, the inventory, and the plan.
pub(crate) fn checked_create(
    ctx: &Ctx,
    app: &AppState,
    sent: &ProviderBody,
) -> Result<(String, Inventory, InventoryPlan), ApiError> {
    let uuid = before_body(ctx, app, sent, CREATE)?;
    let NewInventory { class, inventory } = NewInventory::read(&sent.body)?;
    // A path: the middleware makes every Location absolute (crate::context).
    let url = format!("/resource_providers/{uuid}/inventories/{}", class.as_str());
    let rule = rule(ctx);
    let plan: InventoryPlan =
        Box::new(move |view, now| view.add_inventory(&uuid, &class, inventory, rule, now));
    Ok((url, inventory, plan))
}

/// `POST /resource_providers/{uuid}/inventories`: add one class's inventory.
pub async fn create(ctx: Ctx, State(app): State<AppState>, sent: ProviderBody) -> ApiResult {
    let (url, inventory, plan) = checked_create(&ctx, &app, &sent)?;
    let (generation, now) = write(&app, plan).await?;
    let response = http::json(StatusCode::CREATED, &one_body(&inventory, generation));
    Ok(cached(&ctx, http::location(response, &url), Some(now)))
}

/// `PUT .../inventories/{class}`'s checks and body: the inventory, and the plan.
pub(crate) fn checked_update(
    ctx: &Ctx,
    app: &AppState,
    class: &str,
    sent: &ProviderBody,
) -> Result<(Inventory, InventoryPlan), ApiError> {
    let uuid = before_body(ctx, app, sent, UPDATE)?;
    let InventoryUpdate {
        generation: expected,
        inventory,
    } = InventoryUpdate::read(&sent.body)?;
    let rule = rule(ctx);
    // Any path segment reaches the rules, which answer one that is no class name as
    // an unknown class.
    let class = ResourceClass::requested(class);
    let plan: InventoryPlan = Box::new(move |view, now| {
        view.update_inventory(&uuid, expected, &class, inventory, rule, now)
    });
    Ok((inventory, plan))
}

/// `PUT /resource_providers/{uuid}/inventories/{resource_class}`: replace one class's
/// inventory.
pub async fn update(
    ctx: Ctx,
    State(app): State<AppState>,
    Path((_, class)): Path<(String, String)>,
    sent: ProviderBody,
) -> ApiResult {
    let (inventory, plan) = checked_update(&ctx, &app, &class, &sent)?;
    let (generation, now) = write(&app, plan).await?;
    let response = http::json(StatusCode::OK, &one_body(&inventory, generation));
    Ok(cached(&ctx, response, Some(now)))
}

/// `PUT .../inventories`'s checks and body: the inventories as the request gave them,
/// and the plan.
pub(crate) fn checked_replace_all(
    ctx: &Ctx,
    app: &AppState,
    sent: &ProviderBody,
) -> Result<(AllInventories, InventoryPlan), ApiError> {
    let uuid = before_body(ctx, app, sent, UPDATE)?;
    let all = AllInventories::read(&sent.body)?;
    let rule = rule(ctx);
    let (expected, planned) = (all.generation, all.inventories.clone());
    let plan: InventoryPlan =
        Box::new(move |view, now| view.set_inventories(&uuid, expected, &planned, rule, now));
    Ok((all, plan))
}

/// `PUT /resource_providers/{uuid}/inventories`: replace all inventories.
pub async fn replace_all(ctx: Ctx, State(app): State<AppState>, sent: ProviderBody) -> ApiResult {
    let (AllInventories { inventories, .. }, plan) = checked_replace_all(&ctx, &app, &sent)?;
    let (generation, now) = write(&app, plan).await?;
    // Written, so every entry was an inventory of an existing class.
    let written = inventories
        .iter()
        .filter_map(|(c, i)| Some((c.as_str(), i.as_ref()?)));
    let body = all_body(written, generation);
    Ok(cached(&ctx, http::json(StatusCode::OK, &body), Some(now)))
}

/// `DELETE .../inventories/{class}`'s checks: the plan.
pub(crate) fn checked_delete(
    ctx: &Ctx,
    app: &AppState,
    path: &ProviderPath,
    class: &str,
) -> Result<InventoryPlan, ApiError> {
    authorize(ctx, app.config.settings.policy, DELETE)?;
    let uuid = path.uuid(no_provider)?;
    let class = ResourceClass::requested(class);
    Ok(Box::new(move |view, now| {
        view.delete_inventory(&uuid, &class, now)
    }))
}

/// `DELETE /resource_providers/{uuid}/inventories/{resource_class}`.
pub async fn delete(
    ctx: Ctx,
    State(app): State<AppState>,
    path: ProviderPath,
    Path((_, class)): Path<(String, String)>,
) -> ApiResult {
    let plan = checked_delete(&ctx, &app, &path, &class)?;
    app.write(WriteKind::Inventory, plan).await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

/// `DELETE .../inventories`'s checks (1.5; before, the method is not allowed, as
/// Placement says): the plan.
pub(crate) fn checked_delete_all(
    ctx: &Ctx,
    app: &AppState,
    path: &ProviderPath,
) -> Result<InventoryPlan, ApiError> {
    if !ctx.version.at_least(5) {
        return Err(ApiError::method_not_allowed());
    }
    authorize(ctx, app.config.settings.policy, DELETE)?;
    let uuid = path.uuid(no_provider)?;
    Ok(Box::new(move |view, now| {
        view.delete_inventories(&uuid, now)
    }))
}

/// `DELETE /resource_providers/{uuid}/inventories`.
pub async fn delete_all(ctx: Ctx, State(app): State<AppState>, path: ProviderPath) -> ApiResult {
    let plan = checked_delete_all(&ctx, &app, &path)?;
    app.write(WriteKind::Inventory, plan).await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bodies_hide_generation_zero() {
        let inv = Inventory {
            reserved: 1,
            ..Inventory::with_total(8)
        };
        let value = |body| serde_json::to_value(body).unwrap();
        let one = value(one_body(&inv, 0));
        assert!(one.get("resource_provider_generation").is_none());
        assert_eq!(value(one_body(&inv, 3))["resource_provider_generation"], 3);
        assert_eq!(one["allocation_ratio"], json!(1.0));
        let all = serde_json::to_value(all_body([("VCPU", &inv)].into_iter(), 0)).unwrap();
        assert_eq!(all["resource_provider_generation"], 0);
        assert_eq!(all["inventories"]["VCPU"]["total"], 8);
    }

    #[test]
    fn paths() {
        let e = ProviderPath::new("nope").uuid(no_provider_get).unwrap_err();
        assert_eq!(
            e.message,
            "No resource provider with uuid nope found : No resource provider with uuid nope found"
        );
    }
}
