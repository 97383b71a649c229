//! The inventory bodies: `POST` and `PUT .../inventories/{class}` (one inventory),
//! `PUT .../inventories` (all of a provider's), and the same "all of a provider's"
//! form in each entry of the reshaper's `inventories`.
//!
//! Like Placement's, the schema of the "all" form checks only the inventories under
//! keys shaped like class names. The others name no class, which the core refuses in
//! its turn (after the generation, as Placement does); their inventories are still
//! read here, and one that is no inventory at all is handed on as none (never as a
//! made-up inventory), so that the core refuses it at the same point.

use std::num::NonZeroU64;

use allot_core::{Inventory, RequestedName, ResourceClass};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{given_generation, not_valid, GivenGeneration, JsonBody};
use crate::error::ApiError;
use crate::schemas;

/// One inventory's fields as a request gives them; what it leaves out takes
/// Placement's defaults.
#[derive(Debug, Deserialize)]
struct Fields {
    total: u64,
    reserved: Option<u64>,
    min_unit: Option<u64>,
    max_unit: Option<u64>,
    /// Never 0: the schema's minimum is 1, and an `Inventory` cannot hold 0.
    step_size: Option<NonZeroU64>,
    allocation_ratio: Option<f64>,
}

impl Fields {
    /// The inventory, with Placement's defaults for what the request leaves out. The
    /// one place a request's fields become an [`Inventory`].
    fn inventory(&self) -> Inventory {
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

/// `POST /resource_providers/{uuid}/inventories`: one class's inventory.
#[derive(Debug)]
pub struct NewInventory {
    /// The class as the request names it. The schema's pattern does not bound the
    /// length: a name too long to be a class is answered as an unknown class.
    pub class: RequestedName<ResourceClass>,
    /// The inventory.
    pub inventory: Inventory,
}

impl NewInventory {
    /// Reads and checks the body.
    pub fn read(body: &JsonBody) -> Result<Self, ApiError> {
        // A generation is accepted and ignored, as in Placement.
        #[derive(Deserialize)]
        struct Post {
            resource_class: String,
            #[serde(flatten)]
            fields: Fields,
        }
        let post: Post = body.read(&schemas::inventory_post())?;
        Ok(NewInventory {
            class: ResourceClass::requested(&post.resource_class),
            inventory: post.fields.inventory(),
        })
    }
}

/// `PUT /resource_providers/{uuid}/inventories/{class}`: one class's inventory, under
/// a generation check.
#[derive(Debug)]
pub struct InventoryUpdate {
    /// The generation the client believes the provider has.
    pub generation: GivenGeneration,
    /// The inventory.
    pub inventory: Inventory,
}

impl InventoryUpdate {
    /// Reads and checks the body.
    pub fn read(body: &JsonBody) -> Result<Self, ApiError> {
        #[derive(Deserialize)]
        struct Put {
            #[serde(deserialize_with = "given_generation")]
            resource_provider_generation: GivenGeneration,
            #[serde(flatten)]
            fields: Fields,
        }
        let put: Put = body.read(&schemas::inventory_put())?;
        Ok(InventoryUpdate {
            generation: put.resource_provider_generation,
            inventory: put.fields.inventory(),
        })
    }
}

/// All of a provider's inventories, by class as the request names them (which need
/// not exist, nor be names at all: the core refuses both alike), under a generation
/// check: the body of `PUT /resource_providers/{uuid}/inventories` and each provider's
/// entry in the reshaper.
#[derive(Debug, Clone, PartialEq)]
pub struct AllInventories {
    /// The generation the client believes the provider has.
    pub generation: GivenGeneration,
    /// The inventories, in the order of the request; none where an entry under a key
    /// that is no class name is no inventory either.
    pub inventories: Vec<(RequestedName<ResourceClass>, Option<Inventory>)>,
}

/// The tree of [`AllInventories`] as its schema checked it.
#[derive(Deserialize)]
struct AllBody {
    #[serde(deserialize_with = "given_generation")]
    resource_provider_generation: GivenGeneration,
    inventories: Map<String, Value>,
}

impl AllInventories {
    /// Reads and checks the body of `PUT /resource_providers/{provider}/inventories`.
    pub fn read(body: &JsonBody) -> Result<Self, ApiError> {
        Ok(Self::convert(body.read(&schemas::inventories_put())?))
    }

    /// Reads one provider's entry of a checked reshaper body.
    pub(crate) fn from_reshaper(value: &Value) -> Result<Self, ApiError> {
        let body = AllBody::deserialize(value).map_err(not_valid)?;
        Ok(Self::convert(body))
    }

    fn convert(body: AllBody) -> Self {
        let inventories = body
            .inventories
            .iter()
            .map(|(class, fields)| {
                // Only the inventories under class-shaped keys were checked (so they
                // read): one under another key may be no inventory at all, and is
                // handed on as none, for the core to refuse the class it names.
                let inventory = Fields::deserialize(fields).ok().map(|f| f.inventory());
                (ResourceClass::requested(class), inventory)
            })
            .collect();
        AllInventories {
            generation: body.resource_provider_generation,
            inventories,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::validate;
    use crate::schemas::{inventories_put, inventory_post, inventory_put};
    use serde_json::json;

    use crate::request::test_body as body;

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
    fn bodies_fill_defaults() {
        let put = InventoryUpdate::read(&body(
            json!({"resource_provider_generation": -2, "total": 8, "reserved": 1}),
        ))
        .unwrap();
        assert_eq!(
            put.inventory,
            Inventory {
                reserved: 1,
                ..Inventory::with_total(8)
            }
        );
        assert_eq!(put.inventory.max_unit, 2147483647);
        assert_eq!(put.generation, GivenGeneration(-2));
        let post = NewInventory::read(&body(
            json!({"resource_class": "DISK_GB", "total": 2, "allocation_ratio": 2}),
        ))
        .unwrap();
        assert_eq!(post.class, ResourceClass::requested("DISK_GB"));
        assert_eq!(post.inventory.allocation_ratio, 2.0);
    }

    #[test]
    fn unchecked_inventories_are_read_or_handed_on_as_none() {
        let all = |inventories: Value| {
            AllInventories::read(&body(
                json!({"resource_provider_generation": 3, "inventories": inventories}),
            ))
        };
        let read = all(json!({"VCPU": {"total": 8}, "house": {"total": 2}})).unwrap();
        assert_eq!(read.generation, GivenGeneration(3));
        assert_eq!(
            read.inventories,
            [
                (
                    ResourceClass::requested("VCPU"),
                    Some(Inventory::with_total(8))
                ),
                (
                    RequestedName::NotAName("house".into()),
                    Some(Inventory::with_total(2))
                ),
            ]
        );
        let none = all(json!({"house": 3})).unwrap();
        assert_eq!(
            none.inventories,
            [(RequestedName::NotAName("house".into()), None)]
        );
    }
}
