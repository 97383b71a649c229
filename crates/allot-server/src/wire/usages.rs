//! Usages: of one provider, and of a project's consumers (`GET /usages`, 1.9).
//!
//! `handlers::usages` writes these bodies by hand (`wire::write`), straight from the
//! core's sums; these types are the shape it follows and the oracle its tests hold it
//! to.

use std::collections::BTreeMap;

use serde::Serialize;

/// `GET /resource_providers/{uuid}/usages`: what allocations use of each class the
/// provider has inventory of. The same at every microversion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderUsages<'a> {
    /// The provider's generation.
    pub resource_provider_generation: u64,
    /// Used amount by class name (0 for an unused inventory).
    pub usages: BTreeMap<&'a str, u64>,
}

/// `GET /usages` from 1.9 to 1.37: what a project's (or user's) consumers hold in all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Usages<'a> {
    /// Used amount by class name (only classes something is allocated of).
    pub usages: BTreeMap<&'a str, u64>,
}

/// `GET /usages` from 1.38: the same sums, grouped by consumer type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsagesByType<'a> {
    /// By consumer type (`INSTANCE`, ..., `unknown` for consumers without one).
    pub usages: BTreeMap<&'a str, ConsumerTypeUsages<'a>>,
}

/// One consumer type's usages: the sums by class and `consumer_count`, side by side in
/// one object. Class names are upper case, so `consumer_count` sorts after all of them
/// and is written last, as a sorted map would.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConsumerTypeUsages<'a> {
    /// Used amount by class name.
    #[serde(flatten)]
    pub usages: BTreeMap<&'a str, u64>,
    /// How many distinct consumers of this type hold anything.
    pub consumer_count: usize,
}
