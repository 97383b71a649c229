//! The in-memory view of everything allot knows, and how changes fold into it.
//!
//! One `State` is loaded from the store at start-up and kept exact by applying the
//! [`Change`]s of every committed write. Reads (the HTTP GETs, and later the candidate
//! search) run on it and never touch the store.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use uuid::Uuid;

use crate::change::Change;
use crate::compact::{IdTable, VecMap, VecSet};
use crate::model::{
    Allocation, ClassRecord, Consumer, ConsumerRow, Provider, ProviderId, TraitRecord,
};
use crate::names::{ResourceClass, TraitName};
use crate::standard;

/// Everything allot knows, in memory.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// Providers by internal id, in id order so that listings come in creation order,
    /// as Placement lists them.
    pub(crate) providers: IdTable<Provider>,
    pub(crate) by_uuid: HashMap<Uuid, ProviderId>,
    pub(crate) by_name: HashMap<String, ProviderId>,
    /// Custom resource classes (standard ones are in [`standard::RESOURCE_CLASSES`]).
    pub(crate) classes: BTreeMap<ResourceClass, ClassRecord>,
    /// Custom traits (standard ones are in [`standard::TRAITS`]).
    pub(crate) traits: BTreeMap<TraitName, TraitRecord>,
    /// The next provider id to hand out: one more than the largest ever seen, so that
    /// ids are never reused even after deletes.
    pub(crate) next_provider_id: u64,
    /// Consumers and their allocations: the records.
    /// Boxed: a hash table's slots are a power of two, often half empty, and an empty
    /// slot then costs a pointer instead of a whole consumer.
    pub(crate) consumers: HashMap<Uuid, Box<Consumer>>,
    /// Derived from `consumers` by `apply`, never written otherwise: per provider, the
    /// sum of every allocation of each class, and which consumers hold any. An index
    /// for reads, not a counter: `check_usage_index` recomputes it from the records.
    pub(crate) usage: HashMap<ProviderId, ProviderUsage>,
    /// Derived by `apply`: the providers that have the `MISC_SHARES_VIA_AGGREGATE`
    /// trait (few, and the candidate search needs them for every request).
    pub(crate) sharing: BTreeSet<ProviderId>,
    /// Every name and text the records carry, held once (see [`Interned`]).
    pub(crate) interned: Interned,
}

/// The view's one copy of each name and text that many records carry: the resource
/// classes of inventories and allocations, the traits of providers, and the projects,
/// users and types of consumers. A change arrives with its own copies (parsed from a
/// request or read from the store); `apply` swaps them for these, so that a million
/// allocations of `VCPU` share one string instead of holding a million.
#[derive(Debug, Clone, Default)]
pub(crate) struct Interned {
    classes: HashSet<ResourceClass>,
    traits: HashSet<TraitName>,
    texts: HashSet<Arc<str>>,
}

impl Interned {
    fn class(&mut self, name: &ResourceClass) -> ResourceClass {
        if let Some(held) = self.classes.get(name.as_str()) {
            return held.clone();
        }
        self.classes.insert(name.clone());
        name.clone()
    }

    fn trait_name(&mut self, name: &TraitName) -> TraitName {
        if let Some(held) = self.traits.get(name.as_str()) {
            return held.clone();
        }
        self.traits.insert(name.clone());
        name.clone()
    }

    fn text(&mut self, text: &Arc<str>) -> Arc<str> {
        if let Some(held) = self.texts.get(text) {
            return held.clone();
        }
        self.texts.insert(text.clone());
        text.clone()
    }

    /// Forgets a text that no record holds any more (the interner's own copy and the
    /// caller's are the only two left). Classes and traits are not forgotten: they
    /// are few, and exist as records of their own.
    fn release_text(&mut self, text: Arc<str>) {
        if Arc::strong_count(&text) == 2 {
            self.texts.remove(&text);
        }
    }

    fn consumer_row(&mut self, row: &ConsumerRow) -> ConsumerRow {
        ConsumerRow {
            project_id: self.text(&row.project_id),
            user_id: self.text(&row.user_id),
            consumer_type: row.consumer_type.as_ref().map(|t| self.text(t)),
            ..row.clone()
        }
    }

    fn release_consumer_row(&mut self, row: ConsumerRow) {
        self.release_text(row.project_id);
        self.release_text(row.user_id);
        if let Some(t) = row.consumer_type {
            self.release_text(t);
        }
    }
}

/// What allocations use on one provider (see [`State::usage`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderUsage {
    /// Sum of allocations per class (classes with nothing allocated are absent).
    pub by_class: VecMap<ResourceClass, u64>,
    /// Consumers holding at least one allocation here.
    pub consumers: VecSet<Uuid>,
}

impl State {
    /// An empty state: no providers, only the standard classes and traits.
    pub fn new() -> Self {
        State {
            next_provider_id: 1,
            ..Default::default()
        }
    }

    /// Folds committed changes into the view. Changes come from a plan made against
    /// this same state, so they are consistent with it; applying them cannot fail.
    pub fn apply(&mut self, changes: &[Change]) {
        for change in changes {
            self.apply_one(change);
        }
    }

    fn apply_one(&mut self, change: &Change) {
        match change {
            Change::PutClass { record, old_name } => {
                if let Some(old) = old_name {
                    self.classes.remove(old.as_str());
                    self.rename_class_everywhere(old, &record.name);
                }
                self.classes.insert(record.name.clone(), record.clone());
            }
            Change::DeleteClass(name) => {
                self.classes.remove(name.as_str());
            }
            Change::PutTrait(record) => {
                self.traits.insert(record.name.clone(), record.clone());
            }
            Change::DeleteTrait(name) => {
                self.traits.remove(name.as_str());
            }
            Change::PutProvider { row, .. } => {
                self.next_provider_id = self.next_provider_id.max(row.id.0 + 1);
                let id = row.id;
                match self.providers.get_mut(&id) {
                    Some(existing) => {
                        let old_parent = existing.row.parent;
                        if existing.row.name != row.name {
                            self.by_name.remove(&existing.row.name);
                            self.by_name.insert(row.name.clone(), id);
                        }
                        existing.row = row.clone();
                        if old_parent != row.parent {
                            if let Some(p) = old_parent.and_then(|p| self.providers.get_mut(&p)) {
                                p.children.remove(&id);
                            }
                            if let Some(p) = row.parent.and_then(|p| self.providers.get_mut(&p)) {
                                p.children.insert(id);
                            }
                        }
                    }
                    None => {
                        self.by_uuid.insert(row.uuid, id);
                        self.by_name.insert(row.name.clone(), id);
                        if let Some(p) = row.parent.and_then(|p| self.providers.get_mut(&p)) {
                            p.children.insert(id);
                        }
                        // A parent always exists before its children are created, so
                        // a new provider has no children yet. (A store loading rows in
                        // another order calls `relink_children` afterwards.)
                        self.providers.insert(id, Provider::new(row.clone()));
                    }
                }
            }
            Change::DeleteProvider(id) => {
                self.sharing.remove(id);
                if let Some(p) = self.providers.remove(id) {
                    self.by_uuid.remove(&p.row.uuid);
                    self.by_name.remove(&p.row.name);
                    if let Some(parent) = p.row.parent.and_then(|pid| self.providers.get_mut(&pid))
                    {
                        parent.children.remove(id);
                    }
                }
            }
            Change::SetInventories(id, inventories) => {
                if let Some(p) = self.providers.get_mut(id) {
                    let interned = &mut self.interned;
                    p.inventories = inventories
                        .iter()
                        .map(|(class, inv)| (interned.class(class), *inv))
                        .collect();
                }
            }
            Change::SetTraits(id, traits) => {
                if let Some(p) = self.providers.get_mut(id) {
                    let interned = &mut self.interned;
                    p.traits = traits.iter().map(|t| interned.trait_name(t)).collect();
                    if p.traits.contains(crate::names::SHARING_TRAIT) {
                        self.sharing.insert(*id);
                    } else {
                        self.sharing.remove(id);
                    }
                }
            }
            Change::SetAggregates(id, aggregates) => {
                if let Some(p) = self.providers.get_mut(id) {
                    p.aggregates = aggregates.iter().copied().collect();
                }
            }
            Change::PutConsumer { row, .. } => {
                let row = self.interned.consumer_row(row);
                match self.consumers.get_mut(&row.uuid) {
                    Some(c) => {
                        let old = std::mem::replace(&mut c.row, row);
                        self.interned.release_consumer_row(old);
                    }
                    None => {
                        self.consumers.insert(
                            row.uuid,
                            Box::new(Consumer {
                                row,
                                allocations: Box::default(),
                            }),
                        );
                    }
                }
            }
            Change::DeleteConsumer(uuid) => {
                self.replace_allocations(uuid, Vec::new());
                if let Some(c) = self.consumers.remove(uuid) {
                    self.interned.release_consumer_row(c.row);
                }
            }
            Change::SetAllocations(uuid, allocations) => {
                let interned = &mut self.interned;
                let allocations = allocations
                    .iter()
                    .map(|a| Allocation {
                        class: interned.class(&a.class),
                        ..a.clone()
                    })
                    .collect();
                self.replace_allocations(uuid, allocations);
            }
        }
    }

    /// Carries a renamed class's inventories, allocations and usage over to the new
    /// name. Placement refers to classes by id, so a rename never orphans what uses the
    /// class; we refer to them by name and must move the records along.
    fn rename_class_everywhere(&mut self, old: &ResourceClass, new: &ResourceClass) {
        for p in self.providers.values_mut() {
            if let Some(inv) = p.inventories.remove(old.as_str()) {
                p.inventories.insert(new.clone(), inv);
            }
        }
        for c in self.consumers.values_mut() {
            let mut touched = false;
            for a in c.allocations.iter_mut().filter(|a| a.class == *old) {
                a.class = new.clone();
                touched = true;
            }
            if touched {
                c.allocations.sort();
            }
        }
        for u in self.usage.values_mut() {
            if let Some(v) = u.by_class.remove(old.as_str()) {
                u.by_class.insert(new.clone(), v);
            }
        }
    }

    /// Swaps a consumer's allocations and moves the usage index by the difference.
    fn replace_allocations(&mut self, consumer: &Uuid, mut new: Vec<Allocation>) {
        let Some(c) = self.consumers.get_mut(consumer) else {
            return;
        };
        new.sort();
        let old = std::mem::replace(&mut c.allocations, new.into_boxed_slice());
        let new = &c.allocations;
        for a in &old {
            if let Some(u) = self.usage.get_mut(&a.provider) {
                if let Some(v) = u.by_class.get_mut(&a.class) {
                    *v -= a.used;
                    if *v == 0 {
                        u.by_class.remove(&a.class);
                    }
                }
                u.consumers.remove(consumer);
                if u.consumers.is_empty() && u.by_class.is_empty() {
                    self.usage.remove(&a.provider);
                }
            }
        }
        for a in new {
            let u = self.usage.entry(a.provider).or_default();
            *u.by_class.get_or_insert_with(a.class.clone(), || 0) += a.used;
            u.consumers.insert(*consumer);
        }
    }

    /// Recomputes the usage index from the allocation records and compares it with the
    /// one `apply` maintains. For tests and debug checks: they must always agree.
    pub fn check_usage_index(&self) -> bool {
        let mut fresh: HashMap<ProviderId, ProviderUsage> = HashMap::new();
        for c in self.consumers.values() {
            for a in &c.allocations {
                let u = fresh.entry(a.provider).or_default();
                *u.by_class.get_or_insert_with(a.class.clone(), || 0) += a.used;
                u.consumers.insert(c.row.uuid);
            }
        }
        fresh.retain(|_, u| !u.by_class.is_empty() || !u.consumers.is_empty());
        for u in fresh.values_mut() {
            u.by_class.retain(|_, v| *v > 0);
        }
        fresh == self.usage
    }

    /// Rebuilds every provider's `children` from the children's `parent`, in one pass.
    /// For stores that load provider rows in an order where a child may come before its
    /// parent (after a re-parenting, ids are not in tree order).
    pub fn relink_children(&mut self) {
        let links: Vec<(ProviderId, ProviderId)> = self
            .providers
            .values()
            .filter_map(|p| p.row.parent.map(|parent| (parent, p.row.id)))
            .collect();
        for p in self.providers.values_mut() {
            p.children.clear();
        }
        for (parent, child) in links {
            if let Some(p) = self.providers.get_mut(&parent) {
                p.children.insert(child);
            }
        }
    }

    // ----- lookups -----

    /// A provider by internal id.
    pub fn provider(&self, id: ProviderId) -> Option<&Provider> {
        self.providers.get(&id)
    }

    /// A provider by uuid.
    pub fn provider_by_uuid(&self, uuid: &Uuid) -> Option<&Provider> {
        self.by_uuid.get(uuid).and_then(|id| self.providers.get(id))
    }

    /// A provider by name.
    pub fn provider_by_name(&self, name: &str) -> Option<&Provider> {
        self.by_name.get(name).and_then(|id| self.providers.get(id))
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

    /// Whether a trait exists (standard or custom).
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
    pub fn usage(&self, provider: ProviderId, class: &ResourceClass) -> u64 {
        self.usage
            .get(&provider)
            .and_then(|u| u.by_class.get(class))
            .copied()
            .unwrap_or(0)
    }

    /// Everything allocated on a provider (None if nothing is).
    pub fn provider_usage_index(&self, provider: ProviderId) -> Option<&ProviderUsage> {
        self.usage.get(&provider)
    }

    /// A consumer by uuid.
    pub fn consumer(&self, uuid: &Uuid) -> Option<&Consumer> {
        self.consumers.get(uuid).map(|c| &**c)
    }

    /// All consumers, in no particular order.
    pub fn consumers(&self) -> impl Iterator<Item = &Consumer> {
        self.consumers.values().map(|c| &**c)
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{new_provider, rc, tn};

    fn row(id: u64, parent: Option<u64>) -> Change {
        new_provider(id, Uuid::from_u128(id as u128), parent, 0)
    }

    #[test]
    fn children_loaded_before_their_parent_are_relinked() {
        // After a re-parenting, a child may have a smaller id than its parent.
        let mut s = State::new();
        s.apply(&[row(1, Some(2)), row(2, None), row(3, Some(2))]);
        s.relink_children();
        let children: Vec<u64> = s
            .provider(ProviderId(2))
            .unwrap()
            .children
            .iter()
            .map(|c| c.0)
            .collect();
        assert_eq!(children, vec![1, 3]);
        assert!(s.provider(ProviderId(1)).unwrap().children.is_empty());
    }

    use super::*;

    #[test]
    fn standard_lists_are_sorted_where_searched() {
        assert!(standard::TRAITS.windows(2).all(|w| w[0] < w[1]));
        assert!(State::new().trait_exists(&tn("HW_CPU_X86_AVX2")));
        assert!(State::new().class_exists(&rc("VCPU")));
        assert!(!State::new().class_exists(&rc("CUSTOM_NOPE")));
    }
}
