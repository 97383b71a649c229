//! `POST /reshaper` (1.30): replace the inventories of several providers and the
//! allocations of several consumers at once, all or nothing.
//!
//! The rule and its messages are the core's (`allot_core::ops::reshaper`, which runs
//! the one allocation rule with the reshaper's wording); here are the order of
//! Placement's checks (microversion, content type, policy, schema), the body, and the
//! one refusal with its own error code (a provider named for inventories that does
//! not exist).
//!
//! The body is parsed once, checked against its schema, and read into
//! [`ReshapeBody`]. Its `allocations` part has the form of `POST /allocations` at the
//! same microversion (from 1.28: consumer generations; 1.34: `mappings`, accepted and
//! ignored; 1.38: a required `consumer_type`) and is read by the same typed form and
//! conversion ([`ConsumerBody`], [`consumer_writes`]).

use allot_core::ops::allocations::Endpoint;
use allot_core::ops::reshaper::{MissingProvider, ProviderInventories};
use allot_core::{Inventory, ProviderRef, ResourceClass};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::allocations::{consumer_writes, ConsumerBody, Entries};
// Inventories come in the shape of `PUT .../inventories`, whose schema the reshaper's
// reuses.
use super::inventories::InventoryBody;
use crate::context::Ctx;
use crate::error::{codes, ApiError, ApiResult};
use crate::policy::{authorize, Action};
use crate::{http, schemas, AppState};

const RESHAPE: Action = Action::Reshape;

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new().route("/reshaper", post(reshape))
}

/// A reshaper body, read from the tree its schema has checked.
#[derive(Debug, Deserialize)]
pub(crate) struct ReshapeBody {
    /// By provider uuid, as written: `resource_provider_generation` and
    /// `inventories`, whose entries only the schema's class-name keys checked (see
    /// [`provider_inventories`]).
    inventories: Map<String, Value>,
    /// By consumer uuid, in the form of `POST /allocations`.
    allocations: Entries<ConsumerBody>,
}

fn object(value: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    value
        .as_object()
        .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

/// A generation as the request gives it; an integer too large for an `i64` (which
/// the schema lets through) can match no generation either way.
fn given_generation(value: &Value) -> i64 {
    value.as_i64().unwrap_or(i64::MAX)
}

/// The `inventories` part of a validated body.
fn provider_inventories(inventories: &Map<String, Value>) -> Vec<ProviderInventories> {
    inventories
        .iter()
        .map(|(uuid, request)| ProviderInventories {
            provider: ProviderRef::parse(uuid),
            generation: given_generation(&request["resource_provider_generation"]),
            inventories: object(&request["inventories"])
                .iter()
                .map(|(class, raw)| {
                    // Only keys shaped like class names had their inventory checked by
                    // the schema. The others name no class, which the rule refuses
                    // whatever their inventory says.
                    let inventory = InventoryBody::deserialize(raw)
                        .map(|b| b.inventory())
                        .unwrap_or_else(|_| Inventory::with_total(1));
                    (ResourceClass::requested(class), inventory)
                })
                .collect(),
        })
        .collect()
}

/// `POST /reshaper`.
pub async fn reshape(
    ctx: Ctx,
    State(app): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    ctx.require(30)?;
    http::require_json_content(&headers, &body)?;
    authorize(&ctx, app.config.policy, RESHAPE)?;
    let minor = ctx.version.0;
    let body: ReshapeBody = http::json_body(&headers, &body, &schemas::reshaper(minor))?;
    let providers = provider_inventories(&body.inventories);
    let consumers = consumer_writes(body.allocations, minor, Endpoint::Reshaper)?;
    let answer = app
        .write(move |view, now| view.reshape(&providers, &consumers, now))
        .await?;
    if let Err(MissingProvider(message)) = answer {
        return Err(ApiError::bad_request(message).with_code(codes::PROVIDER_NOT_FOUND));
    }
    Ok(http::empty(StatusCode::NO_CONTENT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema;
    use allot_core::ops::allocations::ConsumerGeneration;
    use allot_core::ProviderRef;
    use serde_json::json;

    /// A checked body as the handler reads it.
    fn typed(value: Value) -> ReshapeBody {
        serde_json::from_value(value).unwrap()
    }

    const RP: &str = "9e3cbba2-2fe3-4be5-9d0b-2d1c2e5c5d9e";
    const CONSUMER: &str = "6b1e0e3b-6b47-4b4d-9f4c-9a6a0a9b6f10";

    fn body(allocation: Value) -> Value {
        json!({
            "inventories": {
                RP: {
                    "resource_provider_generation": 5,
                    "inventories": {"DISK_GB": {"total": 2048, "step_size": 10}, "house": 3},
                },
            },
            "allocations": {CONSUMER: allocation},
        })
    }

    fn allocation() -> Value {
        json!({
            "allocations": {RP: {"resources": {"DISK_GB": 20, "VCPU": 1}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": 1,
        })
    }

    fn invalid(value: &Value, minor: u16) -> String {
        schema::validate(value, &schemas::reshaper(minor))
            .expect_err("invalid")
            .to_string()
    }

    #[test]
    fn schema_by_microversion() {
        assert!(schema::validate(&body(allocation()), &schemas::reshaper(30)).is_ok());
        // (minor, body, start of the message)
        let mut with_mappings = allocation();
        with_mappings["mappings"] = json!({"": [RP]});
        let mut with_type = allocation();
        with_type["consumer_type"] = json!("INSTANCE");
        let mut lower_type = with_type.clone();
        lower_type["consumer_type"] = json!("instance");
        let mut bad_field = allocation();
        bad_field["bad_field"] = json!("moo");
        let mut zero = allocation();
        zero["allocations"][RP]["resources"]["VCPU"] = json!(0);
        let mut no_generation = allocation();
        no_generation
            .as_object_mut()
            .unwrap()
            .remove("consumer_generation");
        let cases: Vec<(u16, Value, &str)> = vec![
            (
                30,
                json!({"inventories": {RP: {"resource_provider_generation": 0, "inventories": {}}}}),
                "'allocations' is a required property",
            ),
            (
                30,
                json!({"inventories": {}, "allocations": {}}),
                "{} should be non-empty",
            ),
            (
                30,
                body(bad_field),
                "Additional properties are not allowed ('bad_field' was unexpected)",
            ),
            (
                33,
                body(with_mappings.clone()),
                "Additional properties are not allowed ('mappings' was unexpected)",
            ),
            (
                37,
                body(with_type.clone()),
                "Additional properties are not allowed ('consumer_type' was unexpected)",
            ),
            (
                38,
                body(allocation()),
                "'consumer_type' is a required property",
            ),
            (38, body(lower_type), "'instance' does not match"),
            (30, body(zero), "0 is less than the minimum of 1"),
            (
                30,
                body(no_generation),
                "'consumer_generation' is a required property",
            ),
        ];
        for (minor, value, wanted) in cases {
            let got = invalid(&value, minor);
            assert!(got.starts_with(wanted), "{minor}: {got}\n  wanted {wanted}");
        }
        assert!(schema::validate(&body(with_mappings), &schemas::reshaper(34)).is_ok());
        assert!(schema::validate(&body(with_type), &schemas::reshaper(38)).is_ok());
        // No allocations at all is allowed, and so is a consumer emptied.
        let mut emptied = allocation();
        emptied["allocations"] = json!({});
        assert!(schema::validate(&body(emptied), &schemas::reshaper(30)).is_ok());
        let mut none = body(allocation());
        none["allocations"] = json!({});
        assert!(schema::validate(&none, &schemas::reshaper(30)).is_ok());
        // An inventory field that does not exist.
        let mut odd = body(allocation());
        odd["inventories"][RP]["inventories"]["DISK_GB"]["bad_field"] = json!("moo");
        assert!(invalid(&odd, 30).contains("'bad_field' was unexpected"));
    }

    #[test]
    fn bodies_become_requests() {
        let value = typed(body(allocation()));
        let providers = provider_inventories(&value.inventories);
        assert_eq!(providers.len(), 1);
        assert_eq!(providers[0].provider, ProviderRef::parse(RP));
        assert_eq!(providers[0].generation, 5);
        let disk = &providers[0].inventories[0];
        assert_eq!(disk.0, ResourceClass::requested("DISK_GB"));
        assert_eq!(
            disk.1,
            Inventory {
                step_size: std::num::NonZeroU64::new(10).unwrap(),
                ..Inventory::with_total(2048)
            }
        );
        // Not a class name: kept, for the rule to refuse.
        assert_eq!(
            providers[0].inventories[1].0,
            allot_core::RequestedName::NotAName("house".into())
        );

        let writes = consumer_writes(value.allocations, 30, Endpoint::Reshaper).unwrap();
        assert_eq!(writes.len(), 1);
        let w = &writes[0];
        assert_eq!(w.consumer.to_string(), CONSUMER);
        assert_eq!(w.generation, ConsumerGeneration::Is(1));
        assert_eq!(w.consumer_type, None);
        let amounts: Vec<(String, u64)> = w
            .allocations
            .iter()
            .map(|r| (r.class.to_string(), r.used))
            .collect();
        assert_eq!(amounts, [("DISK_GB".into(), 20), ("VCPU".into(), 1)]);

        let mut with_type = allocation();
        with_type["consumer_type"] = json!("RESHAPED");
        with_type["consumer_generation"] = Value::Null;
        let writes =
            consumer_writes(typed(body(with_type)).allocations, 38, Endpoint::Reshaper).unwrap();
        assert_eq!(writes[0].consumer_type.as_deref(), Some("RESHAPED"));
        assert_eq!(writes[0].generation, ConsumerGeneration::New);

        let mut upper = allocation();
        upper["allocations"] = json!({RP.to_uppercase(): {"resources": {"VCPU": 1}}});
        // Another spelling names no provider; the rule refuses it in its turn.
        let writes =
            consumer_writes(typed(body(upper)).allocations, 30, Endpoint::Reshaper).unwrap();
        assert_eq!(
            writes[0].allocations[0].provider,
            ProviderRef::Spelled(RP.to_uppercase())
        );
        assert_eq!(given_generation(&json!(u64::MAX)), i64::MAX);
        assert_eq!(given_generation(&json!(-3)), -3);
    }
}
