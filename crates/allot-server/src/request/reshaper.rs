//! The body of `POST /reshaper` (1.30): the new inventories of several providers, in
//! the form of `PUT .../inventories` by provider uuid, and the allocations of several
//! consumers, in the form of `POST /allocations` at the same microversion (from 1.28:
//! consumer generations; 1.34: `mappings`, accepted and ignored; 1.38: a required
//! `consumer_type`), read by the same typed forms.

use allot_core::ops::allocations::{ConsumerWrite, Endpoint};
use allot_core::ops::reshaper::ProviderInventories;
use allot_core::ProviderRef;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::allocations::{consumer_writes, ConsumerBody};
use super::inventories::AllInventories;
use super::{Entries, JsonBody};
use crate::error::ApiError;
use crate::schemas;

/// A reshape as the core takes it.
#[derive(Debug)]
pub struct Reshape {
    /// The providers' new inventories, in request order.
    pub providers: Vec<ProviderInventories>,
    /// The consumers' writes, in request order.
    pub consumers: Vec<ConsumerWrite>,
}

/// A reshaper body, read from the tree its schema has checked.
#[derive(Debug, Deserialize)]
struct ReshapeBody {
    /// By provider uuid, as written, each in the form of `PUT .../inventories`.
    inventories: Map<String, Value>,
    /// By consumer uuid, in the form of `POST /allocations`.
    allocations: Entries<ConsumerBody>,
}

impl Reshape {
    /// Reads and checks the body at `1.minor`.
    pub fn read(body: &JsonBody, minor: u16) -> Result<Self, ApiError> {
        let body: ReshapeBody = body.read(&schemas::reshaper(minor))?;
        Self::convert(body, minor)
    }

    fn convert(body: ReshapeBody, minor: u16) -> Result<Self, ApiError> {
        let providers = body
            .inventories
            .iter()
            .map(|(uuid, request)| {
                let all = AllInventories::from_reshaper(request)?;
                Ok(ProviderInventories {
                    provider: ProviderRef::parse(uuid),
                    generation: all.generation,
                    inventories: all.inventories,
                })
            })
            .collect::<Result<_, ApiError>>()?;
        let consumers = consumer_writes(body.allocations, minor, Endpoint::Reshaper)?;
        Ok(Reshape {
            providers,
            consumers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::GivenGeneration;
    use crate::schema;
    use allot_core::ops::allocations::ConsumerGeneration;
    use allot_core::{Inventory, ResourceClass};
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
        let mut value = body(allocation());
        // An inventory under a key that is no class name is read all the same, or
        // handed on as none when it is no inventory (the rule refuses the class).
        let none = Reshape::convert(typed(value.clone()), 30)
            .unwrap()
            .providers;
        assert_eq!(none[0].inventories[1].1, None);
        value["inventories"][RP]["inventories"]["house"] = json!({"total": 3});
        let providers = Reshape::convert(typed(value.clone()), 30)
            .unwrap()
            .providers;
        let value = typed(value);
        assert_eq!(providers.len(), 1);
        assert_eq!(providers[0].provider, ProviderRef::parse(RP));
        assert_eq!(providers[0].generation, GivenGeneration(5));
        let disk = &providers[0].inventories[0];
        assert_eq!(disk.0, ResourceClass::requested("DISK_GB"));
        assert_eq!(
            disk.1,
            Some(Inventory {
                step_size: std::num::NonZeroU64::new(10).unwrap(),
                ..Inventory::with_total(2048)
            })
        );
        // Not a class name: kept, for the rule to refuse.
        assert_eq!(
            providers[0].inventories[1].0,
            allot_core::RequestedName::NotAName("house".into())
        );
        assert_eq!(
            providers[0].inventories[1].1,
            Some(Inventory::with_total(3))
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
        let mut far = body(allocation());
        far["inventories"][RP]["resource_provider_generation"] = json!(u64::MAX);
        far["allocations"] = json!({});
        far["inventories"][RP]["inventories"]["house"] = json!({"total": 3});
        let providers = Reshape::convert(typed(far), 30).unwrap().providers;
        assert_eq!(providers[0].generation, GivenGeneration(u64::MAX.into()));
    }
}
