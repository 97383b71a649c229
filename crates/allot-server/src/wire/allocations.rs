//! Allocations: what one consumer holds (`GET /allocations/{consumer}`) and what is
//! held on one provider (`GET /resource_providers/{uuid}/allocations`).
//!
//! These two bodies are the exception to the alphabetical rule of [`crate::wire`]:
//! when they were last built as `serde_json::Value`s, maps kept the order of
//! insertion (`preserve_order`), so clients have seen their fields in the order the
//! handler added them, and a consumer's providers in the order the view lists them
//! (the order the providers were created). The fields below are declared in that
//! order, and `tests/wire.rs` pins it.
//!
//! `handlers::allocations` writes both bodies by hand (`wire::write`), straight from
//! the view; these types are the shape it follows and the oracle its tests hold it to.

use std::collections::BTreeMap;

use allot_core::Uuid;
use serde::Serialize;

use super::InOrder;

/// `GET /allocations/{consumer_uuid}`. A consumer that holds nothing (or is unknown)
/// has only the empty `allocations`, at every microversion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConsumerAllocations<'a> {
    /// What it holds by provider uuid, providers in the view's order.
    pub allocations: InOrder<Uuid, HeldOnProvider<'a>>,
    /// From 1.12.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_id: Option<&'a str>,
    /// From 1.12.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_id: Option<&'a str>,
    /// From 1.28.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer_generation: Option<u64>,
    /// From 1.38 (`unknown` for a consumer written without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer_type: Option<&'a str>,
}

/// What a consumer holds on one provider, with the provider's generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldOnProvider<'a> {
    /// The provider's generation.
    pub generation: u64,
    /// Amount by class name.
    pub resources: BTreeMap<&'a str, u64>,
}

/// `GET /resource_providers/{uuid}/allocations`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderAllocations<'a> {
    /// What each consumer holds on the provider, by consumer uuid.
    pub allocations: BTreeMap<&'a Uuid, HeldByConsumer<'a>>,
    /// The provider's generation.
    pub resource_provider_generation: u64,
}

/// What one consumer holds on the provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldByConsumer<'a> {
    /// Amount by class name.
    pub resources: BTreeMap<&'a str, u64>,
    /// The consumer's generation, from 1.28.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer_generation: Option<u64>,
}
