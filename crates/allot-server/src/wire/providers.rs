//! `/resource_providers` and the provider's sub-resources that are lists of names:
//! its aggregates (1.1) and its traits (1.6).

use serde::Serialize;
use uuid::Uuid;

use super::{Link, Nullable};

/// One provider: `GET /resource_providers/{uuid}`, the answer of its `PUT`, of the
/// `POST /resource_providers` from 1.20 (before, that answer has no body), and an
/// item of [`ProviderList`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderBody<'a> {
    /// Its generation, which every change to it bumps.
    pub generation: u64,
    /// `self`, `inventories` and `usages`; from 1.1 `aggregates`, from 1.6 `traits`,
    /// from 1.11 `allocations`, in that order.
    pub links: Vec<Link>,
    /// Its name.
    pub name: &'a str,
    /// From 1.14: its parent, `null` for a root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_provider_uuid: Option<Nullable<&'a Uuid>>,
    /// From 1.14: the root of its tree (itself for a root).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_provider_uuid: Option<&'a Uuid>,
    /// Its uuid.
    pub uuid: &'a Uuid,
}

/// `GET /resource_providers`: the providers that pass the filters, in creation order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderList<'a> {
    /// The providers.
    pub resource_providers: Vec<ProviderBody<'a>>,
}

/// `GET` and `PUT /resource_providers/{uuid}/aggregates` (1.1): the aggregates the
/// provider is a member of (the `PUT` repeats them as they were sent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderAggregates<'a> {
    /// Aggregate uuids.
    pub aggregates: &'a [String],
    /// From 1.19: the provider's generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_provider_generation: Option<u64>,
}

/// `GET` and `PUT /resource_providers/{uuid}/traits` (1.6): the provider's traits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderTraits<'a> {
    /// The provider's generation.
    pub resource_provider_generation: u64,
    /// Trait names, sorted.
    pub traits: Vec<&'a str>,
}
