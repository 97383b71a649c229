//! Reading the view: providers, classes, traits, usage, claims and consumers by key.

use std::hash::BuildHasher;
use std::num::NonZeroU64;

use uuid::Uuid;

use super::State;
use crate::model::{
    Claim, ClassRecord, Consumer, Provider, ProviderId, ProviderUsage, Timestamp, TraitRecord,
};
use crate::names::{ResourceClass, TraitName};
use crate::standard;

impl State {
    /// A provider by internal id.
    #[inline]
    pub fn provider(&self, id: ProviderId) -> Option<&Provider> {
        self.providers.get(&id)
    }

    fn provider_at(&self, id: &NonZeroU64) -> Option<&Provider> {
        self.providers.get(&ProviderId(id.get()))
    }

    /// A provider by uuid.
    #[inline]
    pub fn provider_by_uuid(&self, uuid: &Uuid) -> Option<&Provider> {
        let hash = self.hasher.hash_one(uuid);
        let found = |id: &NonZeroU64| self.provider_at(id).is_some_and(|p| p.row.uuid == *uuid);
        self.by_uuid
            .find(hash, found)
            .and_then(|id| self.provider_at(id))
    }

    /// A provider by name.
    #[inline]
    pub fn provider_by_name(&self, name: &str) -> Option<&Provider> {
        let hash = self.hasher.hash_one(name);
        let found = |id: &NonZeroU64| self.provider_at(id).is_some_and(|p| p.row.name == name);
        self.by_name
            .find(hash, found)
            .and_then(|id| self.provider_at(id))
    }

    /// All providers, in creation order.
    pub fn providers(&self) -> impl Iterator<Item = &Provider> {
        self.providers.values()
    }

    /// The providers with the `MISC_SHARES_VIA_AGGREGATE` trait, in creation order.
    pub fn sharing_providers(&self) -> impl Iterator<Item = &Provider> {
        self.sharing.iter().filter_map(|id| self.providers.get(id))
    }

    /// The uuid of a provider known to exist (parents and roots of existing providers).
    #[inline]
    pub fn uuid_of(&self, id: ProviderId) -> Uuid {
        self.providers
            .get(&id)
            .map(|p| p.row.uuid)
            .unwrap_or_default()
    }

    /// The id the next new provider gets.
    pub fn next_provider_id(&self) -> ProviderId {
        ProviderId(self.next_provider_id.max(1))
    }

    /// Whether a resource class exists (standard or custom).
    #[inline]
    pub fn class_exists(&self, name: &ResourceClass) -> bool {
        standard::RESOURCE_CLASSES.contains(&name.as_str()) || self.classes.contains_key(name)
    }

    /// A custom resource class's record.
    pub fn custom_class(&self, name: &ResourceClass) -> Option<&ClassRecord> {
        self.classes.get(name)
    }

    /// All resource class names: the standard ones in their release order, then the
    /// custom ones by name.
    pub fn class_names(&self) -> impl Iterator<Item = &str> {
        standard::RESOURCE_CLASSES
            .iter()
            .copied()
            .chain(self.classes.keys().map(|c| c.as_str()))
    }

    /// All custom resource classes.
    pub fn custom_classes(&self) -> impl Iterator<Item = &ClassRecord> {
        self.classes.values()
    }

    /// The metadata set on custom classes, as held (a class with none set has no
    /// entry; `State::class_metadata` answers for any class).
    pub fn class_metadata_entries(
        &self,
    ) -> impl Iterator<Item = (&ResourceClass, &crate::ClassMetadata)> {
        self.class_metadata.iter()
    }

    /// Whether a trait exists (standard or custom).
    #[inline]
    pub fn trait_exists(&self, name: &TraitName) -> bool {
        standard::TRAITS.binary_search(&name.as_str()).is_ok() || self.traits.contains_key(name)
    }

    /// A custom trait's record.
    pub fn custom_trait(&self, name: &TraitName) -> Option<&TraitRecord> {
        self.traits.get(name)
    }

    /// All trait names, sorted.
    pub fn trait_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = standard::TRAITS
            .iter()
            .copied()
            .chain(self.traits.keys().map(|t| t.as_str()))
            .collect();
        names.sort_unstable();
        names
    }

    /// All custom traits.
    pub fn custom_traits(&self) -> impl Iterator<Item = &TraitRecord> {
        self.traits.values()
    }

    /// How much of `class` the allocations against `provider` use in all.
    #[inline]
    pub fn usage(&self, provider: ProviderId, class: &ResourceClass) -> u64 {
        self.providers
            .get(&provider)
            .and_then(|p| p.usage.by_class.get(class))
            .copied()
            .unwrap_or(0)
    }

    /// How much of `class` is taken on `provider` at `now`: allocations plus live
    /// pending claims (see [`Provider::used`]). What capacity decisions count.
    #[inline]
    pub fn used(&self, provider: ProviderId, class: &ResourceClass, now: Timestamp) -> u64 {
        self.providers
            .get(&provider)
            .map_or(0, |p| p.used(class.as_str(), now))
    }

    /// A claim by uuid (live or ended, until purged).
    #[inline]
    pub fn claim(&self, uuid: &Uuid) -> Option<&Claim> {
        self.claims
            .find(self.hasher.hash_one(uuid), |c| c.uuid == *uuid)
            .map(|c| &**c)
    }

    /// Every claim the view holds, in no particular order.
    pub fn claims(&self) -> impl Iterator<Item = &Claim> {
        self.claims.iter().map(|c| &**c)
    }

    /// Everything allocated on a provider (None if nothing is).
    #[inline]
    pub fn provider_usage_index(&self, provider: ProviderId) -> Option<&ProviderUsage> {
        self.providers
            .get(&provider)
            .map(|p| &p.usage)
            .filter(|u| !u.is_empty())
    }

    /// A consumer by uuid.
    #[inline]
    pub fn consumer(&self, uuid: &Uuid) -> Option<&Consumer> {
        self.consumers.get(&self.hasher, uuid)
    }

    /// All consumers, in no particular order.
    pub fn consumers(&self) -> impl Iterator<Item = &Consumer> {
        self.consumers.iter()
    }
}
