//! `/resource_providers/{uuid}/inventories`: a provider's inventories, listed and
//! replaced as a whole (`DELETE` from 1.5), and one class's at a time.
//!
//! The rules and their messages live in `allot_core::ops::inventories`; here are the
//! HTTP concerns: the order of Placement's checks, the bodies, and the headers.

use allot_core::ops::inventories::ReservedRule;
use allot_core::{Inventory, RequestedName, ResourceClass, Timestamp, Uuid};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::context::Ctx;
use crate::error::{codes, ApiError, ApiResult};
use crate::params::{no_provider, ProviderPath};
use crate::policy::{authorize, Action};
use crate::{http, schemas, wire, AppState};

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

/// One inventory as a request carries it (here and in the reshaper); the schema has
/// checked the bounds.
#[derive(Deserialize)]
pub(crate) struct InventoryBody {
    total: u64,
    reserved: Option<u64>,
    min_unit: Option<u64>,
    max_unit: Option<u64>,
    step_size: Option<std::num::NonZeroU64>,
    allocation_ratio: Option<f64>,
    /// Required by the PUTs, accepted and ignored by the POST.
    resource_provider_generation: Option<Value>,
    /// Only in the POST.
    resource_class: Option<String>,
}

impl InventoryBody {
    /// The inventory, with Placement's defaults for what the request leaves out.
    pub(crate) fn inventory(&self) -> Inventory {
        let defaults = Inventory::with_total(self.total);
        Inventory {
            total: self.total,
            reserved: self.reserved.unwrap_or(defaults.reserved),
            min_unit: self.min_unit.unwrap_or(defaults.min_unit),
            max_unit: self.max_unit.unwrap_or(defaults.max_unit),
            step_size: self.step_size.unwrap_or(defaults.step_size),
            allocation_ratio: self.allocation_ratio.unwrap_or(defaults.allocation_ratio),
        }
    }
}

#[derive(Deserialize)]
struct InventoriesBody {
    resource_provider_generation: Value,
    inventories: Map<String, Value>,
}

/// The generation a request names. Any integer passes the schema; one that cannot be
/// a generation (negative, too large) simply does not match.
fn generation(value: Option<&Value>) -> Result<u64, ApiError> {
    value.and_then(Value::as_u64).ok_or_else(|| {
        ApiError::conflict(
            codes::CONCURRENT_UPDATE,
            "resource provider generation conflict",
        )
    })
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

/// Checks that the provider exists, for the handlers that must say so before they
/// read the body.
fn require_provider(app: &AppState, path: &ProviderPath) -> Result<Uuid, ApiError> {
    Ok(path.provider(&app.host.read(), no_provider)?.uuid())
}

fn rule(ctx: &Ctx) -> ReservedRule {
    ReservedRule::for_minor(ctx.version.0)
}

/// `GET /resource_providers/{uuid}/inventories`.
pub async fn list(ctx: Ctx, State(app): State<AppState>, path: ProviderPath) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.policy, LIST)?;
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
    authorize(&ctx, app.config.policy, SHOW)?;
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

/// `POST /resource_providers/{uuid}/inventories`: add one class's inventory.
pub async fn create(
    ctx: Ctx,
    State(app): State<AppState>,
    path: ProviderPath,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    http::require_json_content(&headers, &body)?;
    authorize(&ctx, app.config.policy, CREATE)?;
    let uuid = require_provider(&app, &path)?;
    let input: InventoryBody = http::json_body(&headers, &body, &schemas::inventory_post())?;
    let class = input.resource_class.clone().unwrap_or_default();
    // The schema's pattern does not bound the length: a class too long to be one is
    // answered as an unknown class, after the capacity check.
    let requested = ResourceClass::requested(&class);
    let inventory = input.inventory();
    let rule = rule(&ctx);
    let (generation, now) = app
        .write(move |view, now| {
            let (generation, changes) =
                view.add_inventory(&uuid, &requested, inventory, rule, now)?;
            Ok(((generation, now), changes))
        })
        .await?;
    let response = http::json(StatusCode::CREATED, &one_body(&inventory, generation));
    // A path: the middleware makes every Location absolute (crate::context).
    let url = format!("/resource_providers/{uuid}/inventories/{class}");
    Ok(cached(&ctx, http::location(response, &url), Some(now)))
}

/// `PUT /resource_providers/{uuid}/inventories/{resource_class}`: replace one class's
/// inventory.
pub async fn update(
    ctx: Ctx,
    State(app): State<AppState>,
    path: ProviderPath,
    Path((_, class)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    http::require_json_content(&headers, &body)?;
    authorize(&ctx, app.config.policy, UPDATE)?;
    let uuid = require_provider(&app, &path)?;
    let input: InventoryBody = http::json_body(&headers, &body, &schemas::inventory_put())?;
    let expected = generation(input.resource_provider_generation.as_ref())?;
    let inventory = input.inventory();
    let rule = rule(&ctx);
    // Any path segment reaches the rules, which answer one that is no class name as
    // an unknown class.
    let class = ResourceClass::requested(&class);
    let (generation, now) = app
        .write(move |view, now| {
            let (generation, changes) =
                view.update_inventory(&uuid, expected, &class, inventory, rule, now)?;
            Ok(((generation, now), changes))
        })
        .await?;
    let response = http::json(StatusCode::OK, &one_body(&inventory, generation));
    Ok(cached(&ctx, response, Some(now)))
}

/// `PUT /resource_providers/{uuid}/inventories`: replace all inventories.
pub async fn replace_all(
    ctx: Ctx,
    State(app): State<AppState>,
    path: ProviderPath,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    http::require_json_content(&headers, &body)?;
    authorize(&ctx, app.config.policy, UPDATE)?;
    let uuid = require_provider(&app, &path)?;
    let input: InventoriesBody = http::json_body(&headers, &body, &schemas::inventories_put())?;
    let expected = generation(Some(&input.resource_provider_generation))?;
    let inventories: Vec<(RequestedName<ResourceClass>, Inventory)> = input
        .inventories
        .into_iter()
        .map(|(class, raw)| {
            // The schema checked the inventories of keys shaped like class names. The
            // others name no class, which the rules refuse; their bodies do not matter.
            let inventory = serde_json::from_value::<InventoryBody>(raw)
                .map(|b| b.inventory())
                .unwrap_or_else(|_| Inventory::with_total(1));
            (ResourceClass::requested(&class), inventory)
        })
        .collect();
    let rule = rule(&ctx);
    let planned = inventories.clone();
    let (generation, now) = app
        .write(move |view, now| {
            let (generation, changes) =
                view.set_inventories(&uuid, expected, &planned, rule, now)?;
            Ok(((generation, now), changes))
        })
        .await?;
    let body = all_body(inventories.iter().map(|(c, i)| (c.as_str(), i)), generation);
    Ok(cached(&ctx, http::json(StatusCode::OK, &body), Some(now)))
}

/// `DELETE /resource_providers/{uuid}/inventories/{resource_class}`.
pub async fn delete(
    ctx: Ctx,
    State(app): State<AppState>,
    path: ProviderPath,
    Path((_, class)): Path<(String, String)>,
) -> ApiResult {
    authorize(&ctx, app.config.policy, DELETE)?;
    let uuid = path.uuid(no_provider)?;
    let class = ResourceClass::requested(&class);
    app.write(move |view, now| view.delete_inventory(&uuid, &class, now))
        .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

/// `DELETE /resource_providers/{uuid}/inventories` (1.5; before, the method is not
/// allowed, as Placement says).
pub async fn delete_all(ctx: Ctx, State(app): State<AppState>, path: ProviderPath) -> ApiResult {
    if !ctx.version.at_least(5) {
        return Err(ApiError::new(StatusCode::METHOD_NOT_ALLOWED, ""));
    }
    authorize(&ctx, app.config.policy, DELETE)?;
    let uuid = path.uuid(no_provider)?;
    app.write(move |view, now| view.delete_inventories(&uuid, now))
        .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::validate;
    use crate::schemas::{inventories_put, inventory_post, inventory_put};
    use serde_json::json;

    #[test]
    fn schemas_word_errors_like_placement() {
        let err = |v: Value, s: Value| validate(&v, &s).unwrap_err().to_string();
        assert!(err(
            json!({"resource_class": "DISK_GB", "total": 0}),
            inventory_post()
        )
        .contains("Failed validating 'minimum' in schema['properties']['total']"));
        assert!(err(json!({"resource_class": "DISK_GB"}), inventory_post())
            .starts_with("'total' is a required property"));
        assert!(err(
            json!({"resource_class": "bad", "total": 1}),
            inventory_post()
        )
        .contains("does not match"));
        assert!(err(json!({"total": 1}), inventory_put())
            .starts_with("'resource_provider_generation' is a required"));
        let ratio =
            json!({"resource_provider_generation": 1, "total": 1, "allocation_ratio": 3.5e39});
        assert!(err(ratio, inventory_put()).contains("Failed validating 'maximum'"));
        let put_all = |inv: Value| json!({"resource_provider_generation": 0, "inventories": inv});
        assert!(err(put_all(json!({"DISK_GB": {"total": 2147483648u64}})), inventories_put())
            .contains("Failed validating 'maximum' in schema['properties']['inventories']['patternProperties']"));
        // Keys that are not class names are left alone, as in Placement.
        assert!(validate(&put_all(json!({"house": {"x": 1}})), &inventories_put()).is_ok());
        assert!(validate(
            &put_all(json!({"VCPU": {"total": 8, "min_unit": 1}})),
            &inventories_put()
        )
        .is_ok());
    }

    #[test]
    fn bodies_fill_defaults_and_hide_generation_zero() {
        let body: InventoryBody =
            serde_json::from_value(json!({"total": 8, "reserved": 1})).unwrap();
        let inv = body.inventory();
        assert_eq!(
            inv,
            Inventory {
                reserved: 1,
                ..Inventory::with_total(8)
            }
        );
        assert_eq!(inv.max_unit, 2147483647);
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
    fn generations_and_paths() {
        assert_eq!(generation(Some(&json!(4))).unwrap(), 4);
        assert_eq!(
            generation(Some(&json!(-1))).unwrap_err().status,
            StatusCode::CONFLICT
        );
        let e = ProviderPath::new("nope").uuid(no_provider_get).unwrap_err();
        assert_eq!(
            e.message,
            "No resource provider with uuid nope found : No resource provider with uuid nope found"
        );
    }
}
