//! `GET /allocation_candidates` (1.10): the candidates and what the client learns of
//! their providers. The largest body, and the one whose shape changes most across
//! microversions.

use std::collections::BTreeMap;

use serde::Serialize;
use uuid::Uuid;

use super::Nullable;

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AllocationCandidates<'a> {
    /// The candidates, all in the form of the request's microversion.
    pub allocation_requests: Vec<AllocationRequest<'a>>,
    /// Every provider the candidates name (from 1.29 every provider of their trees),
    /// by uuid.
    pub provider_summaries: BTreeMap<Uuid, ProviderSummary<'a>>,
}

/// One candidate: what to `PUT` to `/allocations/{consumer}` to claim it. Its form
/// changed at 1.12 from a list of providers to an object keyed by provider uuid; the
/// variants serialize as the struct they hold, with no tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum AllocationRequest<'a> {
    /// Before 1.12.
    Listed(ListedRequest<'a>),
    /// From 1.12.
    Keyed(KeyedRequest<'a>),
}

/// A candidate before 1.12: a list of providers with their resources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListedRequest<'a> {
    /// One entry per provider, in the providers' creation order.
    pub allocations: Vec<ProviderResources<'a>>,
}

/// One provider's part of a [`ListedRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderResources<'a> {
    /// The provider.
    pub resource_provider: ProviderRef,
    /// Amount by class name.
    pub resources: BTreeMap<&'a str, u64>,
}

/// A provider named by its uuid alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderRef {
    /// The provider's uuid.
    pub uuid: Uuid,
}

/// A candidate from 1.12: providers keyed by uuid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyedRequest<'a> {
    /// What each provider gives.
    pub allocations: BTreeMap<Uuid, Resources<'a>>,
    /// From 1.34: for each request group (by suffix, `""` for the unsuffixed one), the
    /// providers that serve it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mappings: Option<BTreeMap<&'a str, Vec<Uuid>>>,
}

/// `{"resources": {class: amount}}`: one provider's part of a [`KeyedRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resources<'a> {
    /// Amount by class name.
    pub resources: BTreeMap<&'a str, u64>,
}

/// What the client learns of one provider, to weigh the candidates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderSummary<'a> {
    /// From 1.29: its parent, `null` for a root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_provider_uuid: Option<Nullable<Uuid>>,
    /// By class name: only the requested classes before 1.27, every inventory from 1.27.
    pub resources: BTreeMap<&'a str, SummaryResource>,
    /// From 1.29: the root of its tree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_provider_uuid: Option<Uuid>,
    /// From 1.17: its traits, standard ones first, then custom ones in the order they
    /// were created.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traits: Option<Vec<&'a str>>,
}

/// One inventory of a [`ProviderSummary`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SummaryResource {
    /// `(total - reserved) * allocation_ratio`, truncated (negative if `reserved`
    /// exceeds `total`).
    pub capacity: i64,
    /// What allocations use.
    pub used: u64,
}
