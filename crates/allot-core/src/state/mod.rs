//! The in-memory view of everything allot knows, and how changes fold into it.
//!
//! One `State` is loaded from the store at start-up and kept exact by applying the
//! [`Change`]s of every committed write. Reads (the HTTP GETs, and later the candidate
//! search) run on it and never touch the store.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasher, Hash};
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex};

use uuid::Uuid;

use crate::change::Change;
use crate::compact::IdTable;
use crate::metadata::ClassMetadata;
use crate::model::{
    Allocation, Claim, ClassRecord, Consumer, ConsumerRow, Inventory, PendingAmount, Provider,
    ProviderId, ProviderRow, Timestamp, TraitRecord, NEVER,
};
use crate::names::{ResourceClass, Text, TraitName};
use crate::persistent::PHashTable;

mod consumers;
mod groups;
pub(crate) mod history;
mod interned;
mod lookups;

use consumers::Consumers;

use interned::{lock, Interned};

/// Everything allot knows, in memory.
///
/// Cloning a state is cheap (a few dozen reference counts, see [`crate::persistent`]):
/// the host publishes each version to readers as an `Arc<State>` and makes the next
/// one by cloning it and applying a batch of changes to the clone, so a reader's
/// version never changes under it and a writer never waits for a reader.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// Providers by internal id, in id order so that listings come in creation order,
    /// as Placement lists them.
    pub(crate) providers: IdTable<Provider>,
    /// Providers by uuid and by name: ids only, the keys are read from the records
    /// (a map would hold every uuid and name a second time). `NonZeroU64` rather than
    /// `ProviderId`, so that an empty slot costs no more than a full one.
    by_uuid: PHashTable<NonZeroU64>,
    by_name: PHashTable<NonZeroU64>,
    /// Hashes the keys of `by_uuid`, `by_name` and `consumers` (SipHash with a random
    /// key: uuids and names come from clients).
    hasher: RandomState,
    /// Custom resource classes (standard ones are in [`standard::RESOURCE_CLASSES`]).
    /// Shared between versions until one changes them (rarely).
    pub(crate) classes: Arc<BTreeMap<ResourceClass, ClassRecord>>,
    /// The metadata operators set on custom classes (see [`crate::metadata`]); a class
    /// without an entry has none. Shared between versions like `classes`.
    pub(crate) class_metadata: Arc<BTreeMap<ResourceClass, ClassMetadata>>,
    /// Custom traits (standard ones are in [`standard::TRAITS`]).
    pub(crate) traits: Arc<BTreeMap<TraitName, TraitRecord>>,
    /// The next provider id to hand out: one more than the largest ever seen, so that
    /// ids are never reused even after deletes.
    pub(crate) next_provider_id: u64,
    /// Consumers and their allocations: the records, by uuid (see
    /// [`consumers`](consumers::Consumers)).
    pub(crate) consumers: Consumers,
    /// Pending claims, live and ended (until purged), by uuid: the records. Each
    /// pending one is also indexed on its providers (`Provider::pending`).
    pub(crate) claims: PHashTable<Box<Claim>>,
    /// Server groups and their members (see [`groups`]).
    pub(crate) groups: groups::Groups,
    /// Drains, and the roots the open ones hold (see [`crate::drains`]).
    pub(crate) drains: crate::drains::Drains,
    /// Web UI sessions logged out before their end: the session id's hash, and
    /// when the session would have ended (`Change::RevokeSession`). Few; shared
    /// between versions like `classes`.
    pub(crate) revoked_sessions: Arc<BTreeMap<String, Timestamp>>,
    /// Named shapes, by name (see [`crate::shapes`]).
    pub(crate) shapes: crate::shapes::Shapes,
    /// Derived by `apply`: the providers that have the `MISC_SHARES_VIA_AGGREGATE`
    /// trait (few, and the candidate search needs them for every request).
    pub(crate) sharing: Arc<BTreeSet<ProviderId>>,
    /// Every name and text the records carry, held once (see [`Interned`]). One
    /// interner for all the versions of a view: interning is the same whichever
    /// version asks, and only the writer (one at a time) applies changes.
    interned: Arc<Mutex<Interned>>,
    /// What the last changes did (see [`history`]): how a kept order learns what
    /// changed since it was made.
    pub(crate) history: history::History,
    /// The weighed walk's kept orders (`crate::candidates::order`), shared by every
    /// version of a view like `interned`: each says which version it is true for.
    pub(crate) orders: Arc<Mutex<crate::candidates::Orders>>,
}

pub use crate::model::ProviderUsage;

/// Consumers gathered beside a view being loaded (see [`State::consumer_table`]).
#[derive(Debug)]
pub struct ConsumerTable {
    hasher: RandomState,
    table: Consumers,
}

impl ConsumerTable {
    /// Reads the slot `insert` of `uuid` will fill, and returns something of it for
    /// `std::hint::black_box` (see [`State::warm_consumers`]).
    pub fn warm(&self, uuid: &Uuid) -> usize {
        self.table.touch(&self.hasher, uuid)
    }

    /// Adds a consumer, on the caller's word that none with its uuid is here (a
    /// store reading the distinct records of a saved view). Its texts and classes are
    /// kept as given: the caller shares one copy of each between its rows.
    pub fn insert(&mut self, row: ConsumerRow, mut allocations: Vec<Allocation>) {
        allocations.sort();
        let consumer = Box::new(Consumer {
            row,
            allocations: allocations.into_boxed_slice(),
        });
        self.table.insert_new(&self.hasher, consumer);
    }

    /// How many consumers it holds.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

impl State {
    /// An empty state: no providers, only the standard classes and traits.
    pub fn new() -> Self {
        State {
            next_provider_id: 1,
            ..Default::default()
        }
    }

    /// Makes room for `consumers` more consumers, so that loading a large view does
    /// not rehash the table again and again. For stores, before a load. (The
    /// provider indexes are built whole by [`State::providers_loaded`].)
    pub fn reserve(&mut self, consumers: usize) {
        self.consumers.reserve(&self.hasher, consumers);
    }

    /// Folds committed changes into the view. Changes come from a plan made against
    /// this same state, so they are consistent with it; applying them cannot fail.
    pub fn apply(&mut self, changes: &[Change]) {
        let effect = self.effect_of(changes);
        for change in changes {
            self.apply_one(change);
        }
        self.history.record(effect);
    }

    /// For stores loading a view: folds in one change, as [`State::apply`] does, but
    /// taking it, so that its lists become the records' own instead of being copied.
    pub fn load_change(&mut self, change: Change) {
        match change {
            Change::SetInventories(id, list) => self.replace_inventories(id, list),
            Change::SetTraits(id, list) => self.replace_traits(id, list),
            Change::SetAggregates(id, list) => {
                if let Some(p) = self.providers.get_mut(&id) {
                    p.aggregates = list.into_iter().collect();
                }
            }
            other => self.apply_one(&other),
        }
    }

    /// For stores loading a view: adds a provider's row, as applying
    /// `Change::PutProvider` does, but taking the row instead of copying it (a load
    /// adds a million of them, and the copy was a name allocated and freed each time),
    /// and leaving it out of the uuid and name indexes until
    /// [`State::providers_loaded`], which the store calls once every row is in.
    pub fn load_provider(&mut self, row: ProviderRow) {
        let id = row.id;
        if self.providers.get(&id).is_some() {
            // Not met in a load (ids are the table's key); the general path handles it.
            self.apply_one(&Change::PutProvider {
                row,
                previous_generation: None,
            });
            return;
        }
        self.next_provider_id = self.next_provider_id.max(id.0 + 1);
        if let Some(p) = row.parent.and_then(|p| self.providers.get_mut(&p)) {
            p.children.insert(id);
        }
        self.providers.insert(id, Provider::new(row));
    }

    /// For stores loading a view: adds a consumer and its allocations, as applying
    /// `Change::PutConsumer` and then (if it holds any) `Change::SetAllocations` does,
    /// in one step: the uuid is hashed and the table probed once instead of three
    /// times, the records are taken instead of copied, and each provider's usage is
    /// touched once for all of the consumer's allocations on it.
    ///
    /// `known_new` is the caller's word that no consumer with this uuid is in the
    /// view (a store reading distinct keys into an empty view): the table is then
    /// not searched for one, a search that reads a record at every occupied slot it
    /// passes. Given wrongly, the view would hold the uuid twice.
    pub fn load_consumer(
        &mut self,
        mut row: ConsumerRow,
        mut allocations: Vec<Allocation>,
        known_new: bool,
    ) {
        if !known_new && self.consumers.get(&self.hasher, &row.uuid).is_some() {
            // Not met in a load (uuids are the table's key); the general path handles it.
            let uuid = row.uuid;
            self.apply_one(&Change::PutConsumer {
                row,
                previous_generation: None,
            });
            if !allocations.is_empty() {
                self.apply_one(&Change::SetAllocations(uuid, allocations));
            }
            return;
        }
        {
            let mut interned = lock(&self.interned);
            row.project_id = interned.text(&row.project_id);
            row.user_id = interned.text(&row.user_id);
            if let Some(t) = &mut row.consumer_type {
                *t = interned.text(t);
            }
            for a in &mut allocations {
                a.class = interned.class(&a.class);
            }
        }
        allocations.sort();
        add_usage(&mut self.providers, &row.uuid, &allocations);
        let consumer = Box::new(Consumer {
            row,
            allocations: allocations.into_boxed_slice(),
        });
        self.consumers.insert_new(&self.hasher, consumer);
    }

    /// For stores loading a view saved whole (`allot-store`'s saved view): sets
    /// provider `id`'s usage index as the saved view held it, instead of deriving it
    /// from the consumers as `load_consumer` does. The consumers can then be gathered
    /// on another thread ([`State::consumer_table`]) without touching a provider.
    /// Given wrongly, the index would disagree with the allocations; the store's tests
    /// hold a saved view to `check_usage_index`.
    pub fn load_usage(
        &mut self,
        id: ProviderId,
        by_class: Vec<(ResourceClass, u64)>,
        consumers: Vec<Uuid>,
    ) {
        if let Some(p) = self.providers.get_mut(&id) {
            let mut interned = lock(&self.interned);
            let by_class = by_class
                .into_iter()
                .map(|(class, used)| (interned.class(&class), used))
                .collect();
            p.usage = ProviderUsage {
                by_class,
                consumers: consumers.into_iter().collect(),
            };
        }
    }

    /// For stores loading a view saved whole: an empty table of consumers, hashed as
    /// this view hashes them and with room for `capacity`, to be filled on another
    /// thread while this one loads the providers, then joined
    /// ([`State::join_consumers`]).
    pub fn consumer_table(&self, capacity: usize) -> ConsumerTable {
        let hasher = self.hasher.clone();
        let mut table = Consumers::default();
        table.reserve(&hasher, capacity);
        ConsumerTable { hasher, table }
    }

    /// Takes the consumers of `table` as this view's (it must hold none yet; their
    /// usage is the providers' already, see [`State::load_usage`]). `texts` are the
    /// projects, users and types the table's rows share: they become the view's
    /// copies. The rows' classes stay the table's own copies, one more copy of each
    /// class name (the two threads would otherwise count references to one copy on
    /// one cache line, which costs more than the copy).
    pub fn join_consumers(&mut self, table: ConsumerTable, texts: impl IntoIterator<Item = Text>) {
        assert!(
            self.consumers.is_empty(),
            "consumers are joined into a view that has none"
        );
        self.consumers = table.table;
        let mut interned = lock(&self.interned);
        for text in texts {
            interned.text(&text);
        }
    }

    /// For stores loading a view in batches: reads what `load_consumer` of each new
    /// consumer of `batch` (its uuid, and a provider it holds allocations on) will
    /// change (the consumer table's slot, the provider's record and its usage), and
    /// returns something of it, for the caller to pass to `std::hint::black_box`.
    /// Warming a batch this way first has the cache misses of its consumers overlap;
    /// folding them one after another waits for each in turn (at a million
    /// providers, in random order, most of a load's time). In three passes, one for
    /// each step of the chain (slots, records, lists), so that the misses of one pass
    /// do not wait for each other.
    pub fn warm_consumers<'a>(
        &self,
        batch: impl Iterator<Item = (&'a Uuid, Option<ProviderId>)> + Clone,
    ) -> usize {
        let mut sum = 0;
        for (uuid, provider) in batch.clone() {
            sum += self.consumers.touch(&self.hasher, uuid);
            sum += provider.map_or(0, |id| self.providers.touch(&id));
        }
        let providers = || batch.clone().filter_map(|(_, id)| self.providers.get(&id?));
        for p in providers() {
            sum += p.usage.consumers.len() + p.usage.by_class.len();
        }
        for p in providers() {
            let u = &p.usage;
            sum += u
                .consumers
                .first()
                .map_or(0, |c| usize::from(c.as_bytes()[0]));
            sum += u.by_class.values().next().map_or(0, |v| *v as usize);
        }
        sum
    }

    fn apply_one(&mut self, change: &Change) {
        match change {
            Change::PutClass { record, old_name } => self.insert_class(record, old_name.as_ref()),
            Change::DeleteClass(name) => self.remove_class(name),
            Change::SetClassMetadata(name, metadata) => {
                self.replace_class_metadata(name, metadata.as_ref())
            }
            Change::PutTrait(record) => self.insert_trait(record),
            Change::DeleteTrait(name) => self.remove_trait(name),
            Change::PutProvider { row, .. } => self.upsert_provider(row),
            Change::DeleteProvider(id) => self.remove_provider(*id),
            Change::SetInventories(id, inventories) => {
                self.replace_inventories(*id, inventories.clone())
            }
            Change::SetTraits(id, traits) => self.replace_traits(*id, traits.clone()),
            Change::SetAggregates(id, aggregates) => self.replace_aggregates(*id, aggregates),
            Change::PutConsumer { row, .. } => self.upsert_consumer(row),
            Change::DeleteConsumer(uuid) => self.remove_consumer(uuid),
            Change::PutClaim(claim) => self.upsert_claim(claim),
            Change::DeleteClaim(uuid) => self.remove_claim(uuid),
            Change::PutServerGroup(group) => self.upsert_server_group(group),
            Change::DeleteServerGroup(uuid) => self.remove_server_group(uuid),
            Change::JoinServerGroup {
                group,
                consumer,
                at,
            } => self.join_server_group(group, consumer, *at),
            Change::PutDrain(drain) => self.upsert_drain(drain),
            Change::DeleteDrain(uuid) => self.remove_drain(uuid),
            Change::PutShape(shape) => self.upsert_shape(shape),
            Change::DeleteShape(name) => self.remove_shape(name),
            Change::SetAllocations(uuid, allocations) => self.set_allocations(uuid, allocations),
            Change::RevokeSession { hash, until, now } => {
                let revoked = Arc::make_mut(&mut self.revoked_sessions);
                revoked.retain(|_, end| *end > *now);
                if until > now {
                    revoked.insert(hash.clone(), *until);
                }
            }
        }
    }

    /// Whether the web UI session whose id hashes to `hash` was logged out.
    pub fn session_revoked(&self, hash: &str) -> bool {
        self.revoked_sessions.contains_key(hash)
    }

    /// The sessions logged out before their end: hash, and when each would have
    /// ended.
    pub fn session_revocations(&self) -> impl Iterator<Item = (&str, Timestamp)> {
        self.revoked_sessions.iter().map(|(h, t)| (h.as_str(), *t))
    }

    /// The work of `Change::PutClass`: a new class, or a class renamed from
    /// `old_name` everywhere it is used.
    fn insert_class(&mut self, record: &ClassRecord, old_name: Option<&ResourceClass>) {
        if let Some(old) = old_name {
            Arc::make_mut(&mut self.classes).remove(old.as_str());
            self.rename_class_everywhere(old, &record.name);
            // Metadata belongs to the class, whatever its name.
            if self.class_metadata.contains_key(old.as_str()) {
                let metadata = Arc::make_mut(&mut self.class_metadata);
                if let Some(m) = metadata.remove(old.as_str()) {
                    metadata.insert(record.name.clone(), m);
                }
            }
        }
        Arc::make_mut(&mut self.classes).insert(record.name.clone(), record.clone());
    }

    /// The work of `Change::DeleteClass`, its metadata with it.
    fn remove_class(&mut self, name: &ResourceClass) {
        Arc::make_mut(&mut self.classes).remove(name.as_str());
        if self.class_metadata.contains_key(name.as_str()) {
            Arc::make_mut(&mut self.class_metadata).remove(name.as_str());
        }
    }

    /// The work of `Change::SetClassMetadata` (None: the class has none).
    fn replace_class_metadata(&mut self, name: &ResourceClass, metadata: Option<&ClassMetadata>) {
        let map = Arc::make_mut(&mut self.class_metadata);
        match metadata {
            Some(m) => map.insert(name.clone(), m.clone()),
            None => map.remove(name.as_str()),
        };
    }

    /// The work of `Change::PutTrait`.
    fn insert_trait(&mut self, record: &TraitRecord) {
        Arc::make_mut(&mut self.traits).insert(record.name.clone(), record.clone());
    }

    /// The work of `Change::DeleteTrait`.
    fn remove_trait(&mut self, name: &TraitName) {
        Arc::make_mut(&mut self.traits).remove(name.as_str());
    }

    /// The work of `Change::PutProvider`: a new provider, or a provider's row
    /// replaced, its name index and its old and new parents' children kept exact.
    fn upsert_provider(&mut self, row: &ProviderRow) {
        self.next_provider_id = self.next_provider_id.max(row.id.0 + 1);
        let id = row.id;
        match self.providers.get_mut(&id) {
            Some(existing) => {
                let old_parent = existing.row.parent;
                let old_name = std::mem::replace(&mut existing.row, row.clone()).name;
                if old_name != row.name {
                    self.unindex_name(&old_name, id);
                    self.index_name(id);
                }
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
                if let Some(p) = row.parent.and_then(|p| self.providers.get_mut(&p)) {
                    p.children.insert(id);
                }
                // A parent always exists before its children are created, so a new
                // provider has no children yet. (A store loading rows in another
                // order calls `providers_loaded` afterwards.)
                self.providers.insert(id, Provider::new(row.clone()));
                self.index_uuid(id);
                self.index_name(id);
            }
        }
    }

    /// The work of `Change::DeleteProvider`: the provider, its indexes, its place
    /// among its parent's children and among the sharing providers.
    fn remove_provider(&mut self, id: ProviderId) {
        if self.sharing.contains(&id) {
            Arc::make_mut(&mut self.sharing).remove(&id);
        }
        if let Some(p) = self.providers.get(&id) {
            let (uuid, name, parent) = (p.row.uuid, p.row.name.clone(), p.row.parent);
            self.unindex_uuid(&uuid, id);
            self.unindex_name(&name, id);
            self.providers.remove(&id);
            if let Some(parent) = parent.and_then(|pid| self.providers.get_mut(&pid)) {
                parent.children.remove(&id);
            }
        }
    }

    /// The work of `Change::SetAggregates`.
    fn replace_aggregates(&mut self, id: ProviderId, aggregates: &[Uuid]) {
        if let Some(p) = self.providers.get_mut(&id) {
            p.aggregates = aggregates.iter().copied().collect();
        }
    }

    /// The work of `Change::PutConsumer`: a new consumer (holding nothing yet), or a
    /// consumer's row replaced.
    fn upsert_consumer(&mut self, row: &ConsumerRow) {
        let row = lock(&self.interned).consumer_row(row);
        match self.consumers.get_mut(&self.hasher, &row.uuid) {
            Some(c) => c.row = row,
            None => {
                let consumer = Box::new(Consumer {
                    row,
                    allocations: Box::default(),
                });
                self.consumers.insert_new(&self.hasher, consumer);
            }
        }
    }

    /// The work of `Change::DeleteConsumer`: its allocations, then the consumer.
    fn remove_consumer(&mut self, uuid: &Uuid) {
        self.replace_allocations(uuid, Vec::new());
        self.consumers.remove(&self.hasher, uuid);
    }

    /// The work of `Change::PutClaim`: the claim replaces any earlier one of its
    /// uuid, indexes included.
    fn upsert_claim(&mut self, claim: &Claim) {
        let claim = Box::new(lock(&self.interned).claim(claim));
        self.remove_claim(&claim.uuid);
        self.index_claim(&claim);
        let hasher = &self.hasher;
        self.claims
            .insert_unique(hasher.hash_one(claim.uuid), claim, |c| {
                hasher.hash_one(c.uuid)
            });
    }

    /// The work of `Change::SetAllocations`: the classes interned, then
    /// [`State::replace_allocations`].
    fn set_allocations(&mut self, uuid: &Uuid, allocations: &[Allocation]) {
        let allocations = {
            let mut interned = lock(&self.interned);
            allocations
                .iter()
                .map(|a| Allocation {
                    class: interned.class(&a.class),
                    ..a.clone()
                })
                .collect()
        };
        self.replace_allocations(uuid, allocations);
    }

    /// The work of `Change::SetInventories`, on a list the caller gives up (it
    /// becomes the provider's, in place).
    fn replace_inventories(&mut self, id: ProviderId, mut list: Vec<(ResourceClass, Inventory)>) {
        if let Some(p) = self.providers.get_mut(&id) {
            let mut interned = lock(&self.interned);
            for (class, _) in &mut list {
                *class = interned.class(class);
            }
            p.inventories = list.into_iter().collect();
        }
    }

    /// The work of `Change::SetTraits`, on a list the caller gives up.
    fn replace_traits(&mut self, id: ProviderId, mut list: Vec<TraitName>) {
        if let Some(p) = self.providers.get_mut(&id) {
            let mut interned = lock(&self.interned);
            for name in &mut list {
                *name = interned.trait_name(name);
            }
            p.traits = list.into_iter().collect();
            let sharing = p.traits.contains(crate::names::SHARING_TRAIT);
            if sharing != self.sharing.contains(&id) {
                let set = Arc::make_mut(&mut self.sharing);
                if sharing {
                    set.insert(id);
                } else {
                    set.remove(&id);
                }
            }
        }
    }

    /// Adds provider `id` (already in `providers`) to the uuid index.
    fn index_uuid(&mut self, id: ProviderId) {
        let providers = &self.providers;
        index(&mut self.by_uuid, &self.hasher, id, |i| {
            uuid_key(providers, i)
        });
    }

    /// Adds provider `id` (already in `providers`) to the name index.
    fn index_name(&mut self, id: ProviderId) {
        let providers = &self.providers;
        index(&mut self.by_name, &self.hasher, id, |i| {
            name_key(providers, i)
        });
    }

    /// Removes provider `id` from the uuid index (its record still there: the
    /// entries after it that move back are hashed by theirs).
    fn unindex_uuid(&mut self, uuid: &Uuid, id: ProviderId) {
        let providers = &self.providers;
        unindex(&mut self.by_uuid, &self.hasher, id, *uuid, |i| {
            uuid_key(providers, i)
        });
    }

    /// Removes provider `id` from the name index, `name` being the one it was
    /// indexed under.
    fn unindex_name(&mut self, name: &str, id: ProviderId) {
        let providers = &self.providers;
        unindex(&mut self.by_name, &self.hasher, id, name, |i| {
            name_key(providers, i)
        });
    }

    /// Carries a renamed class's inventories, allocations and usage over to the new
    /// name. Placement refers to classes by id, so a rename never orphans what uses the
    /// class; we refer to them by name and must move the records along.
    fn rename_class_everywhere(&mut self, old: &ResourceClass, new: &ResourceClass) {
        // The records take the view's one copy of the new name, as `apply` gives them.
        let new = &lock(&self.interned).class(new);
        for p in self.providers.values_mut() {
            if let Some(inv) = p.inventories.remove(old.as_str()) {
                p.inventories.insert(new.clone(), inv);
            }
        }
        for c in self.consumers.iter_mut() {
            let mut touched = false;
            for a in c.allocations.iter_mut().filter(|a| a.class == *old) {
                a.class = new.clone();
                touched = true;
            }
            if touched {
                c.allocations.sort();
            }
        }
        for p in self.providers.values_mut() {
            if let Some(v) = p.usage.by_class.remove(old.as_str()) {
                p.usage.by_class.insert(new.clone(), v);
            }
            p.pending.rename_class(old, new);
        }
        for c in self.claims.iter_mut() {
            if c.allocations.iter().any(|a| a.class == *old) {
                for a in c.allocations.iter_mut().filter(|a| a.class == *old) {
                    a.class = new.clone();
                }
                c.allocations.sort();
            }
        }
    }

    /// Removes a claim's record and its entries in the providers' pending index.
    fn remove_claim(&mut self, uuid: &Uuid) {
        let hasher = &self.hasher;
        let Some(old) = self.claims.remove(
            hasher.hash_one(uuid),
            |c| c.uuid == *uuid,
            |c| hasher.hash_one(c.uuid),
        ) else {
            return;
        };
        if old.state == crate::model::ClaimState::Pending {
            self.note_claim(&old, false);
        }
        let mut seen: Vec<ProviderId> = Vec::new();
        for a in old.allocations.iter() {
            let Some(id) = self.provider_by_uuid(&a.provider).map(Provider::id) else {
                continue;
            };
            if seen.contains(&id) {
                continue;
            }
            seen.push(id);
            if let Some(p) = self.providers.get_mut(&id) {
                p.pending.remove_claim(*uuid);
            }
        }
    }

    /// Adds a pending claim's amounts to its providers' pending index (nothing for an
    /// ended claim). A pending claim's providers exist: one cannot be deleted while a
    /// claim is pending on it, and a claim is only made on existing ones.
    fn index_claim(&mut self, claim: &Claim) {
        if claim.state != crate::model::ClaimState::Pending {
            return;
        }
        self.note_claim(claim, true);
        for a in claim.allocations.iter() {
            let Some(id) = self.provider_by_uuid(&a.provider).map(Provider::id) else {
                continue;
            };
            if let Some(p) = self.providers.get_mut(&id) {
                let entry = PendingAmount {
                    claim: claim.uuid,
                    consumer: claim.consumer,
                    class: a.class.clone(),
                    amount: a.amount,
                    expires_at: claim.expires_at.unwrap_or(NEVER),
                };
                p.pending.insert(entry);
            }
        }
    }

    /// Swaps a consumer's allocations and moves the usage index by the difference.
    fn replace_allocations(&mut self, consumer: &Uuid, mut new: Vec<Allocation>) {
        let Some(c) = self.consumers.get_mut(&self.hasher, consumer) else {
            return;
        };
        new.sort();
        let old = std::mem::replace(&mut c.allocations, new.into_boxed_slice());
        let new = &c.allocations;
        // Allocations name existing providers: one holding any cannot be deleted.
        for a in &old {
            if let Some(p) = self.providers.get_mut(&a.provider) {
                let u = &mut p.usage;
                if let Some(v) = u.by_class.get_mut(&a.class) {
                    *v -= a.used;
                    if *v == 0 {
                        u.by_class.remove(&a.class);
                    }
                }
                u.consumers.remove(consumer);
            }
        }
        add_usage(&mut self.providers, consumer, new);
    }

    /// Recomputes the usage index from the allocation records and compares it with the
    /// one `apply` maintains. For tests and debug checks: they must always agree.
    pub fn check_usage_index(&self) -> bool {
        let mut fresh: HashMap<ProviderId, ProviderUsage> = HashMap::new();
        for c in self.consumers.iter() {
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
        let held: HashMap<ProviderId, ProviderUsage> = self
            .providers
            .values()
            .filter(|p| !p.usage.is_empty())
            .map(|p| (p.id(), p.usage.clone()))
            .collect();
        fresh == held && self.check_pending_index() && self.check_group_index()
    }

    /// Recomputes the pending index from the claim records and compares it with the
    /// one `apply` maintains (as sets of entries per provider).
    fn check_pending_index(&self) -> bool {
        let key = |e: &PendingAmount| (e.claim, e.class.clone(), e.amount, e.expires_at);
        let mut fresh: BTreeMap<ProviderId, Vec<_>> = BTreeMap::new();
        for c in self.claims.iter() {
            if c.state != crate::model::ClaimState::Pending {
                continue;
            }
            for a in c.allocations.iter() {
                let Some(p) = self.provider_by_uuid(&a.provider) else {
                    return false;
                };
                fresh.entry(p.id()).or_default().push((
                    c.uuid,
                    a.class.clone(),
                    a.amount,
                    c.expires_at.unwrap_or(NEVER),
                ));
            }
        }
        let mut held: BTreeMap<ProviderId, Vec<_>> = BTreeMap::new();
        for p in self.providers.values().filter(|p| !p.pending.is_empty()) {
            held.insert(p.id(), p.pending.iter().map(key).collect());
        }
        for list in fresh.values_mut().chain(held.values_mut()) {
            list.sort();
        }
        fresh == held
    }

    /// For stores loading a view, once every provider's row is in
    /// ([`State::load_provider`]): rebuilds every provider's `children` from the
    /// children's `parent` (rows may come in an order where a child comes before its
    /// parent: after a re-parenting, ids are not in tree order), and the uuid and
    /// name indexes, each in one pass that fills its slots front to back
    /// ([`PHashTable::from_hashed`]).
    pub fn providers_loaded(&mut self) {
        let hasher = &self.hasher;
        let providers = &self.providers;
        let entries = |key: &dyn Fn(&Provider) -> u64| {
            providers
                .values()
                .map(|p| (key(p), index_slot(p.id())))
                .collect::<Vec<_>>()
        };
        self.by_uuid = PHashTable::from_hashed(entries(&|p| hasher.hash_one(p.row.uuid)), |i| {
            hasher.hash_one(uuid_key(providers, i))
        });
        self.by_name =
            PHashTable::from_hashed(entries(&|p| hasher.hash_one(p.row.name.as_str())), |i| {
                hasher.hash_one(name_key(providers, i))
            });
        self.relink_children();
    }

    /// Rebuilds every provider's `children` from the children's `parent`, in one pass.
    fn relink_children(&mut self) {
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
}

/// Adds `allocations` (sorted, so by provider) of `consumer` to the usage index,
/// one provider at a time. (A function of the providers alone, so that callers can
/// pass allocations that live in the consumer table.)
fn add_usage(providers: &mut IdTable<Provider>, consumer: &Uuid, allocations: &[Allocation]) {
    for run in allocations.chunk_by(|a, b| a.provider == b.provider) {
        if let Some(p) = providers.get_mut(&run[0].provider) {
            let u = &mut p.usage;
            u.by_class
                .add_all(run.iter().map(|a| (&a.class, a.used)), |v, used| *v += used);
            u.consumers.insert(*consumer);
        }
    }
}

/// A provider id as the uuid and name indexes hold it (ids start at 1).
fn index_slot(id: ProviderId) -> NonZeroU64 {
    NonZeroU64::new(id.0).expect("provider ids start at 1")
}

/// Adds provider `id` to `table`, an index of providers by the key `key` reads from
/// a provider's record (its uuid or its name).
fn index<K: Hash>(
    table: &mut PHashTable<NonZeroU64>,
    hasher: &RandomState,
    id: ProviderId,
    key: impl Fn(&NonZeroU64) -> K,
) {
    let slot = index_slot(id);
    table.insert_unique(hasher.hash_one(key(&slot)), slot, |i| {
        hasher.hash_one(key(i))
    });
}

/// Removes provider `id`, indexed under `old`, from `table` (see [`index`]).
fn unindex<K: Hash>(
    table: &mut PHashTable<NonZeroU64>,
    hasher: &RandomState,
    id: ProviderId,
    old: K,
    key: impl Fn(&NonZeroU64) -> K,
) {
    table.remove(
        hasher.hash_one(old),
        |i| *i == index_slot(id),
        |i| hasher.hash_one(key(i)),
    );
}

/// The key `by_uuid` hashes an id by: its provider's uuid. Every id in the index is
/// a provider's, so the default is never hashed.
fn uuid_key(providers: &IdTable<Provider>, id: &NonZeroU64) -> Uuid {
    providers
        .get(&ProviderId(id.get()))
        .map(|p| p.row.uuid)
        .unwrap_or_default()
}

/// The key `by_name` hashes an id by: its provider's name (see [`uuid_key`]).
fn name_key<'a>(providers: &'a IdTable<Provider>, id: &NonZeroU64) -> &'a str {
    providers
        .get(&ProviderId(id.get()))
        .map_or("", |p| p.row.name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::standard;
    use crate::testing::{new_provider, rc, tn};

    fn row(id: u64, parent: Option<u64>) -> Change {
        new_provider(id, Uuid::from_u128(id as u128), parent, 0)
    }

    /// The uuid and name indexes follow creates, renames and deletes, through the
    /// tables' growth (keys are read from the records when the tables rehash).
    #[test]
    fn indexes_follow_renames_and_deletes() {
        let mut s = State::new();
        let n = 2000;
        s.apply(&(1..=n).map(|i| row(i, None)).collect::<Vec<_>>());
        for i in (1..=n).step_by(3) {
            let Change::PutProvider { mut row, .. } = row(i, None) else {
                unreachable!()
            };
            row.name = format!("renamed{i}");
            s.apply(&[Change::PutProvider {
                row,
                previous_generation: None,
            }]);
        }
        for i in (1..=n).step_by(5) {
            s.apply(&[Change::DeleteProvider(ProviderId(i))]);
        }
        for i in 1..=n {
            let by_uuid = s
                .provider_by_uuid(&Uuid::from_u128(i as u128))
                .map(|p| p.id());
            let deleted = i % 5 == 1;
            assert_eq!(by_uuid, (!deleted).then_some(ProviderId(i)), "uuid of {i}");
            let renamed = i % 3 == 1;
            let current = if renamed {
                format!("renamed{i}")
            } else {
                format!("p{i}")
            };
            let stale = if renamed {
                format!("p{i}")
            } else {
                format!("renamed{i}")
            };
            assert_eq!(
                s.provider_by_name(&current).map(|p| p.id()),
                by_uuid,
                "{current}"
            );
            assert!(s.provider_by_name(&stale).is_none(), "{stale}");
        }
        assert_eq!(s.providers().count() as u64, n - n / 5);
    }

    #[test]
    fn children_loaded_before_their_parent_are_relinked() {
        // After a re-parenting, a child may have a smaller id than its parent.
        let mut s = State::new();
        s.apply(&[row(1, Some(2)), row(2, None), row(3, Some(2))]);
        s.providers_loaded();
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

    /// Loading a view record by record (`load_provider`, `load_consumer`) builds the
    /// same view as applying the equivalent changes: a consumer met twice, one with
    /// no allocations, allocations on one provider and on several.
    #[test]
    fn loading_equals_applying() {
        let consumer = |n: u128, project: &str| ConsumerRow {
            uuid: Uuid::from_u128(n),
            // Each row its own copy of the text, as a store reads them.
            project_id: Text::from(project),
            user_id: Text::from("user"),
            consumer_type: n.is_multiple_of(2).then(|| Text::from("INSTANCE")),
            generation: n as u64,
            created_at: 1,
            updated_at: 2,
        };
        let held = |n: u64| -> Vec<Allocation> {
            vec![
                Allocation {
                    provider: ProviderId(n % 3 + 1),
                    class: rc("VCPU"),
                    used: n,
                },
                Allocation {
                    provider: ProviderId(n % 3 + 1),
                    class: rc("MEMORY_MB"),
                    used: 10 * n,
                },
                Allocation {
                    provider: ProviderId(3 - n % 3),
                    class: rc("DISK_GB"),
                    used: 1,
                },
            ]
        };
        let mut applied = State::new();
        let mut loaded = State::new();
        for id in 1..=3 {
            let change = row(id, (id == 3).then_some(1));
            applied.apply(std::slice::from_ref(&change));
            let Change::PutProvider { row, .. } = change else {
                unreachable!()
            };
            loaded.load_provider(row);
        }
        loaded.providers_loaded();
        let consumers: Vec<(u128, Vec<Allocation>)> = (1..=8)
            .map(|n| (n, if n == 4 { vec![] } else { held(n as u64) }))
            .chain([(2, held(7))])
            .collect();
        for (n, allocations) in &consumers {
            let row = consumer(*n, if n % 3 == 0 { "a" } else { "b" });
            applied.apply(&[Change::PutConsumer {
                row: row.clone(),
                previous_generation: None,
            }]);
            if !allocations.is_empty() {
                applied.apply(&[Change::SetAllocations(row.uuid, allocations.clone())]);
            }
            let new = loaded.consumer(&row.uuid).is_none();
            loaded.load_consumer(row, allocations.clone(), new);
        }
        assert!(loaded.providers().eq(applied.providers()));
        let sorted = |s: &State| {
            let mut all: Vec<Consumer> = s.consumers().cloned().collect();
            all.sort_by_key(|c| c.row.uuid);
            all
        };
        assert_eq!(sorted(&loaded), sorted(&applied));
        assert_eq!(loaded.consumers().count(), 8);
        assert!(loaded.check_usage_index() && applied.check_usage_index());
        assert!(!loaded.provider(ProviderId(1)).unwrap().usage.is_empty());
        // The texts and classes are the view's one copy each.
        let all: Vec<&Consumer> = loaded.consumers().collect();
        assert!(all
            .windows(2)
            .all(|w| Text::ptr_eq(&w[0].row.user_id, &w[1].row.user_id)));
        let vcpus: Vec<&ResourceClass> = all
            .iter()
            .flat_map(|c| c.allocations.iter())
            .filter(|a| a.class.as_str() == "VCPU")
            .map(|a| &a.class)
            .collect();
        assert!(vcpus.len() > 2);
        assert!(vcpus
            .iter()
            .all(|c| c.as_str().as_ptr() == vcpus[0].as_str().as_ptr()));
    }

    #[test]
    fn standard_lists_are_sorted_where_searched() {
        assert!(standard::TRAITS.windows(2).all(|w| w[0] < w[1]));
        assert!(State::new().trait_exists(&tn("HW_CPU_X86_AVX2")));
        assert!(State::new().class_exists(&rc("VCPU")));
        assert!(!State::new().class_exists(&rc("CUSTOM_NOPE")));
    }
}
