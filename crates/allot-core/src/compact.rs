//! Small sorted collections for the records of the view.
//!
//! A provider holds a few inventories, a few traits, an aggregate or two; a
//! `BTreeMap` or `BTreeSet` for each would allocate a whole node (eleven slots) per
//! provider, most of it empty, and the view holds millions of them. A sorted vector
//! holds exactly what is there in one allocation, keeps the order the listings need,
//! and finds an entry by binary search, as fast as a tree at these sizes.
//!
//! Both keep a boxed slice (two words, where a `Vec` takes three) of exactly their
//! length: the records live long and change rarely, so an edit reallocates rather
//! than keeping spare room. Inserting into the middle is linear in the length. The few long lists (the
//! consumers of one provider, say) stay cheap enough: a memmove of a few hundred
//! kilobytes at worst, on a write, never on a read.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

use crate::model::ProviderId;
use crate::persistent::PArray;

/// Up to this many entries, a lookup compares keys for equality one after another
/// instead of searching by order: names of different lengths (`VCPU`, `DISK_GB`)
/// differ at once, where an ordering compares their bytes, and the candidate
/// search looks up every requested class on every provider it meets.
const SCAN_UP_TO: usize = 8;

/// A map kept as a slice of entries sorted by key, with no spare capacity.
#[derive(Clone, PartialEq, Eq)]
pub struct VecMap<K, V> {
    entries: Box<[(K, V)]>,
}

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        VecMap {
            entries: Box::default(),
        }
    }
}

/// Runs `edit` on the items as a vector, and boxes them again with no spare room.
fn edit<T, R>(items: &mut Box<[T]>, edit: impl FnOnce(&mut Vec<T>) -> R) -> R {
    let mut list = std::mem::take(items).into_vec();
    let out = edit(&mut list);
    *items = list.into_boxed_slice();
    out
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for VecMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.entries.iter().map(|(k, v)| (k, v)))
            .finish()
    }
}

impl<K: Ord, V> VecMap<K, V> {
    /// An empty map (allocates nothing).
    pub fn new() -> Self {
        Self::default()
    }

    fn find<Q>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.entries.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }

    /// Where `key` is, if it is here: see [`SCAN_UP_TO`].
    fn position<Q>(&self, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        if self.entries.len() <= SCAN_UP_TO {
            self.entries.iter().position(|(k, _)| k.borrow() == key)
        } else {
            self.find(key).ok()
        }
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value under `key`.
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(key).map(|i| &self.entries[i].1)
    }

    /// The stored key and value under `key`.
    pub fn get_key_value<Q>(&self, key: &Q) -> Option<(&K, &V)>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(key)
            .map(|i| (&self.entries[i].0, &self.entries[i].1))
    }

    /// The value under `key`, to change it.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(key).map(|i| &mut self.entries[i].1)
    }

    /// Whether `key` has an entry.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(key).is_some()
    }

    /// Sets `key` to `value`, returning the value it replaces.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                edit(&mut self.entries, |list| {
                    list.reserve_exact(1);
                    list.insert(i, (key, value))
                });
                None
            }
        }
    }

    /// The value under `key`, inserting `make()` first if there is none.
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.find(&key) {
            Ok(i) => i,
            Err(i) => {
                edit(&mut self.entries, |list| {
                    list.reserve_exact(1);
                    list.insert(i, (key, make()))
                });
                i
            }
        };
        &mut self.entries[i].1
    }

    /// Adds each of `items` (a key and an amount) to its entry through `add`, a key
    /// without one getting `V::default()` first. One reallocation at most, however
    /// many keys are new: adding them one by one would reallocate for each.
    pub fn add_all<'a, A>(
        &mut self,
        items: impl Iterator<Item = (&'a K, A)> + Clone,
        add: impl Fn(&mut V, A),
    ) where
        K: Clone + 'a,
        V: Default,
    {
        let missing = items
            .clone()
            .filter(|(k, _)| self.find(*k).is_err())
            .count();
        if missing > 0 {
            edit(&mut self.entries, |list| {
                list.reserve_exact(missing);
                let held = list.len();
                for (k, _) in items.clone() {
                    let new = list[..held].binary_search_by(|(e, _)| e.cmp(k)).is_err()
                        && !list[held..].iter().any(|(e, _)| e == k);
                    if new {
                        list.push((k.clone(), V::default()));
                    }
                }
                list.sort_by(|a, b| a.0.cmp(&b.0));
            });
        }
        for (k, amount) in items {
            if let Ok(i) = self.find(k) {
                add(&mut self.entries[i].1, amount);
            }
        }
    }

    /// Removes `key`'s entry, returning its value.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let i = self.find(key).ok()?;
        let (_, v) = edit(&mut self.entries, |list| list.remove(i));
        Some(v)
    }

    /// Keeps only the entries `keep` says yes to.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        edit(&mut self.entries, |list| {
            list.retain_mut(|(k, v)| keep(k, v))
        });
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + ExactSizeIterator {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Keys in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + ExactSizeIterator {
        self.entries.iter().map(|(k, _)| k)
    }

    /// Values in key order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.entries.iter().map(|(_, v)| v)
    }

    /// Values in key order, to change them.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.iter_mut().map(|(_, v)| v)
    }
}

impl<K: Ord + Borrow<Q>, V, Q: Ord + ?Sized> std::ops::Index<&Q> for VecMap<K, V> {
    type Output = V;

    /// The value under `key`; panics if there is none, as `BTreeMap` does.
    fn index(&self, key: &Q) -> &V {
        self.get(key).expect("no entry for the key")
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for VecMap<K, V> {
    /// Later entries win over earlier ones with the same key, as with `BTreeMap`.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut entries: Vec<(K, V)> = iter.into_iter().collect();
        // Already in order and distinct (a store's rows, a vector's own): kept as
        // they are, in the vector's own allocation.
        if entries.windows(2).all(|w| w[0].0 < w[1].0) {
            return VecMap {
                entries: entries.into_boxed_slice(),
            };
        }
        // Stable, so equal keys keep their order and the last one can be kept.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(K, V)> = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            match out.last_mut() {
                Some(last) if last.0 == k => last.1 = v,
                _ => out.push((k, v)),
            }
        }
        VecMap {
            entries: out.into_boxed_slice(),
        }
    }
}

impl<'a, K, V> IntoIterator for &'a VecMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

impl<K, V> IntoIterator for VecMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_vec().into_iter()
    }
}

/// A set kept as a sorted slice with no spare capacity.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VecSet<T> {
    items: Box<[T]>,
}

impl<T> Default for VecSet<T> {
    fn default() -> Self {
        VecSet {
            items: Box::default(),
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for VecSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.items.iter()).finish()
    }
}

impl<T: Ord> VecSet<T> {
    /// An empty set (allocates nothing).
    pub fn new() -> Self {
        Self::default()
    }

    fn find<Q>(&self, item: &Q) -> Result<usize, usize>
    where
        T: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.items.binary_search_by(|t| t.borrow().cmp(item))
    }

    /// Whether `item` is here: see [`SCAN_UP_TO`].
    fn holds<Q>(&self, item: &Q) -> bool
    where
        T: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        if self.items.len() <= SCAN_UP_TO {
            self.items.iter().any(|t| t.borrow() == item)
        } else {
            self.find(item).is_ok()
        }
    }

    /// How many items.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Whether `item` is in the set.
    pub fn contains<Q>(&self, item: &Q) -> bool
    where
        T: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.holds(item)
    }

    /// Adds `item`; false if it was there already.
    pub fn insert(&mut self, item: T) -> bool {
        match self.find(&item) {
            Ok(_) => false,
            Err(i) => {
                edit(&mut self.items, |list| {
                    list.reserve_exact(1);
                    list.insert(i, item)
                });
                true
            }
        }
    }

    /// Removes `item`; false if it was not there.
    pub fn remove<Q>(&mut self, item: &Q) -> bool
    where
        T: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        match self.find(item) {
            Ok(i) => {
                edit(&mut self.items, |list| list.remove(i));
                true
            }
            Err(_) => false,
        }
    }

    /// Empties the set and frees its storage.
    pub fn clear(&mut self) {
        self.items = Box::default();
    }

    /// Items in order.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }

    /// Items in order, as a slice.
    pub fn as_slice(&self) -> &[T] {
        &self.items
    }

    /// The smallest item.
    pub fn first(&self) -> Option<&T> {
        self.items.first()
    }
}

impl<T: Ord> FromIterator<T> for VecSet<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut items: Vec<T> = iter.into_iter().collect();
        items.sort_unstable();
        items.dedup();
        VecSet {
            items: items.into_boxed_slice(),
        }
    }
}

impl<'a, T> IntoIterator for &'a VecSet<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

impl<T> IntoIterator for VecSet<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.into_vec().into_iter()
    }
}

/// Records keyed by an increasing id (providers by [`ProviderId`]): a persistent array
/// of (id, record) slots sorted by id, so a record costs its own size, its id and a
/// reference count, and a new version of the view shares every slot it did not
/// change (see [`crate::persistent`]).
///
/// Each record sits behind an `Arc`: a write to one record copies its leaf (15
/// slots of an id and a pointer, so 15 reference counts) and that one record, where
/// records held in the leaf itself made it copy 18 whole providers, each with its
/// lists. At a million providers those copies, and the frees of the version they
/// replace, were the part of a claim's cost that grew with the cloud (issue 25: 8-20%
/// more claims a second at 100,000 and 1,000,000 roots).
///
/// Ids are handed out in increasing order and never reused, so a new record is
/// appended. A removed one leaves a hole (`None`, keeping its id so that the search
/// still works) until holes outnumber the records, when the array is compacted:
/// removal is amortised constant time.
#[derive(Debug, Clone)]
pub struct IdTable<V> {
    slots: PArray<(ProviderId, Option<Arc<V>>)>,
    live: usize,
    /// The first slot's id, kept beside the array: every lookup starts from it.
    first: Option<ProviderId>,
}

impl<V> Default for IdTable<V> {
    fn default() -> Self {
        IdTable {
            slots: PArray::default(),
            live: 0,
            first: None,
        }
    }
}

impl<V> IdTable<V> {
    #[inline]
    fn id_at(&self, i: usize) -> Option<ProviderId> {
        self.slots.get(i).map(|s| s.0)
    }

    /// Where `id` is, or where it would go.
    #[inline]
    fn search(&self, id: &ProviderId) -> Result<usize, usize> {
        // Ids are dense until providers are deleted (and again after a compaction
        // where none were): then a record sits at its id's distance from the first,
        // found with one probe instead of a search through a large array.
        if let Some(first) = self.first {
            if let Some(guess) =
                id.0.checked_sub(first.0)
                    .and_then(|d| usize::try_from(d).ok())
            {
                if self.id_at(guess) == Some(*id) {
                    return Ok(guess);
                }
            }
        }
        // A new id is the largest yet: it goes at the end, no search needed.
        let (mut low, mut high) = (0, self.slots.len());
        if self.id_at(high.wrapping_sub(1)) < Some(*id) {
            return Err(high);
        }
        while low < high {
            let mid = low + (high - low) / 2;
            match self.id_at(mid).cmp(&Some(*id)) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(low)
    }

    /// How many records.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The record with `id`.
    #[inline]
    pub fn get(&self, id: &ProviderId) -> Option<&V> {
        // The dense case first, in one walk down the array (see `search`).
        let first = self.first?;
        if let Some(slot) =
            id.0.checked_sub(first.0)
                .and_then(|d| usize::try_from(d).ok())
                .and_then(|guess| self.slots.get(guess))
        {
            if slot.0 == *id {
                return slot.1.as_deref();
            }
        }
        self.slots.get(self.search(id).ok()?)?.1.as_deref()
    }

    /// Reads the slot of `id` and what changing it looks at (see
    /// [`PArray::touch`]).
    pub fn touch(&self, id: &ProviderId) -> usize {
        match self.search(id) {
            Ok(i) => self.slots.touch(i),
            Err(_) => 0,
        }
    }

    /// The records in id order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.slots.iter().filter_map(|s| s.1.as_deref())
    }
}

impl<V: Clone> IdTable<V> {
    /// The record with `id`, to change it.
    pub fn get_mut(&mut self, id: &ProviderId) -> Option<&mut V> {
        let i = self.search(id).ok()?;
        self.slots.get_mut(i)?.1.as_mut().map(Arc::make_mut)
    }

    /// Stores `value` under `id`, returning the record it replaces.
    pub fn insert(&mut self, id: ProviderId, value: V) -> Option<V> {
        match self.search(&id) {
            Ok(i) => {
                let old = self.slots.get_mut(i)?.1.replace(Arc::new(value));
                if old.is_none() {
                    self.live += 1;
                }
                old.map(Arc::unwrap_or_clone)
            }
            Err(i) if i == self.slots.len() => {
                self.slots.push((id, Some(Arc::new(value))));
                self.first = self.first.or(Some(id));
                self.live += 1;
                None
            }
            Err(i) => {
                // An id below the largest: only a store loading rows out of id order
                // does this. Rebuilt whole, as rare as it is.
                let mut slots: Vec<_> = self.slots.iter().cloned().collect();
                slots.insert(i, (id, Some(Arc::new(value))));
                self.slots = slots.into_iter().collect();
                self.first = self.id_at(0);
                self.live += 1;
                None
            }
        }
    }

    /// Removes the record with `id`.
    pub fn remove(&mut self, id: &ProviderId) -> Option<V> {
        let i = self.search(id).ok()?;
        let old = Arc::unwrap_or_clone(self.slots.get_mut(i)?.1.take()?);
        self.live -= 1;
        let holes = self.slots.len() - self.live;
        if holes > 64 && holes > self.live {
            self.slots = self
                .slots
                .iter()
                .filter(|s| s.1.is_some())
                .cloned()
                .collect();
            self.first = self.id_at(0);
        }
        Some(old)
    }

    /// The records in id order, to change them.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.slots
            .iter_mut()
            .filter_map(|s| s.1.as_mut().map(Arc::make_mut))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    /// The collections answer as the standard trees do, for any sequence of edits.
    #[test]
    fn behave_as_the_trees() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let (mut map, mut tree) = (VecMap::new(), BTreeMap::new());
        let (mut set, mut tset) = (VecSet::new(), BTreeSet::new());
        for _ in 0..5000 {
            let (k, v) = (next() % 40, next());
            match next() % 5 {
                4 => {
                    // Several keys at once, some repeated, some new.
                    let keys = [k, next() % 40, k, next() % 40];
                    map.add_all(keys.iter().map(|k| (k, v)), |e: &mut u64, a| {
                        *e = e.wrapping_add(a)
                    });
                    for k in keys {
                        let e: &mut u64 = tree.entry(k).or_default();
                        *e = e.wrapping_add(v);
                    }
                }
                0 | 1 => {
                    assert_eq!(map.insert(k, v), tree.insert(k, v));
                    assert_eq!(set.insert(k), tset.insert(k));
                }
                2 => {
                    assert_eq!(map.remove(&k), tree.remove(&k));
                    assert_eq!(set.remove(&k), tset.remove(&k));
                }
                _ => {
                    map.retain(|k, _| k % 7 != v % 7);
                    tree.retain(|k, _| k % 7 != v % 7);
                }
            }
            assert_eq!(map.get(&k), tree.get(&k));
            assert!(map.iter().eq(tree.iter()));
            assert!(set.iter().eq(tset.iter()));
        }
        let (mut table, mut ttree) = (IdTable::default(), BTreeMap::new());
        for _ in 0..20000 {
            let (id, v) = (ProviderId(next() % 3000), next());
            if next() % 3 == 0 {
                assert_eq!(table.remove(&id), ttree.remove(&id));
            } else {
                assert_eq!(table.insert(id, v), ttree.insert(id, v));
            }
            assert_eq!(table.get(&id), ttree.get(&id));
            assert_eq!(table.len(), ttree.len());
        }
        assert!(table.values().eq(ttree.values()));
        let collected: VecMap<u8, u8> = [(2, 1), (1, 1), (2, 9)].into_iter().collect();
        assert!(collected.iter().eq([(&1, &1), (&2, &9)]));
        let collected: VecSet<u8> = [3, 1, 3, 2].into_iter().collect();
        assert_eq!(collected.as_slice(), &[1, 2, 3]);
    }
}
