//! `/resource_providers/{uuid}/inventories`: one inventory, or all of a provider's.

use std::collections::BTreeMap;

use allot_core::Inventory;
use serde::Serialize;

/// The six numbers of an inventory, as an item of [`InventoryList`]. The same at
/// every microversion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InventoryFields {
    /// Overcommit factor.
    pub allocation_ratio: f64,
    /// The most one allocation may take.
    pub max_unit: u64,
    /// The least one allocation may take.
    pub min_unit: u64,
    /// Set aside, never allocated.
    pub reserved: u64,
    /// Allocations are multiples of this.
    pub step_size: u64,
    /// How much exists.
    pub total: u64,
}

impl From<&Inventory> for InventoryFields {
    fn from(inv: &Inventory) -> Self {
        InventoryFields {
            allocation_ratio: inv.allocation_ratio,
            max_unit: inv.max_unit,
            min_unit: inv.min_unit,
            reserved: inv.reserved,
            step_size: inv.step_size.get(),
            total: inv.total,
        }
    }
}

/// One class's inventory with the provider's generation: `GET`, `PUT` and `POST` of
/// `/resource_providers/{uuid}/inventories[/{class}]`. Its own type rather than
/// [`InventoryFields`] plus a field, because the generation sorts in the middle of
/// the six numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InventoryBody {
    /// Overcommit factor.
    pub allocation_ratio: f64,
    /// The most one allocation may take.
    pub max_unit: u64,
    /// The least one allocation may take.
    pub min_unit: u64,
    /// Set aside, never allocated.
    pub reserved: u64,
    /// The provider's generation. Placement leaves it out when it is 0 (at every
    /// microversion).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_provider_generation: Option<u64>,
    /// Allocations are multiples of this.
    pub step_size: u64,
    /// How much exists.
    pub total: u64,
}

impl InventoryBody {
    /// The body of `inv`, with the provider's generation if it is to be sent.
    pub fn new(inv: &Inventory, generation: Option<u64>) -> Self {
        InventoryBody {
            allocation_ratio: inv.allocation_ratio,
            max_unit: inv.max_unit,
            min_unit: inv.min_unit,
            reserved: inv.reserved,
            resource_provider_generation: generation,
            step_size: inv.step_size.get(),
            total: inv.total,
        }
    }
}

/// All of a provider's inventories: `GET` and `PUT /resource_providers/{uuid}/inventories`.
/// The same at every microversion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InventoryList<'a> {
    /// By resource class name.
    pub inventories: BTreeMap<&'a str, InventoryFields>,
    /// The provider's generation (sent even when 0).
    pub resource_provider_generation: u64,
}
