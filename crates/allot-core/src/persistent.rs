//! Persistent collections: cloning one is a handful of reference-count increments, and
//! a change copies only the small piece it touches.
//!
//! The view is published to readers as an immutable version (`Arc<State>`), and the
//! writer makes the next version by cloning the current one and applying a batch of
//! changes to the clone. For that to be cheap at a million providers, the big tables
//! cannot be copied whole: they are split into leaves of a few slots (about 4 KiB, see
//! `leaf_len`) under nodes of [`NODE`] leaves, each behind an `Arc`. A clone shares
//! every node and leaf (and the list of nodes itself, until a change needs a list of
//! its own); changing a slot copies its node (a page of pointers) and its
//! leaf, and only if another version still shares them (`Arc::make_mut`). A reader holding an old
//! version keeps exactly the pieces that have changed since alive, and frees them when
//! it lets go.
//!
//! Two levels, not a deeper tree: a lookup is three dependent loads (node, leaf, slot)
//! where a flat vector takes one or two, and the candidate search looks providers up
//! by id hundreds of thousands of times per query. With fifteen providers to a leaf, a
//! million providers need 1,042 nodes of 64 leaves, so a batch that changes providers
//! copies about 8 KB of pointers. Why 64 leaves a node and not more: a change copies
//! its node too, a count on each of the node's leaves up and, once the old version is
//! gone, down again. Once the cloud has more nodes than a batch has changes, every
//! change copies a node of its own: at a million roots under a claim storm, nodes of
//! 256 leaves cost the writer a fifth of its time, and 64 took a claim storm from
//! 4,400 to 5,100 claims/s (docs/design/view-copies.md).
//!
//! - [`PArray`]: a growable array of slots, indexed by position.
//! - [`PHashTable`]: an open-addressing hash table over a `PArray` (linear probing,
//!   deletion by backward shift, so no tombstones), whose keys may live in the values
//!   or elsewhere: every operation takes the hash and an equality test, as
//!   `hashbrown::HashTable` does.

use std::fmt;
use std::sync::Arc;

/// Leaves per node.
pub const NODE: usize = 64;

/// How many slots of `size` bytes a leaf holds: as many as fit, with the `Arc`'s two
/// counters, in an allocation of exactly one of the allocator's size classes (4 KiB
/// for large slots, 256 bytes for small ones, or `class` bytes when not 0), so that
/// no leaf pays for rounding up. Small leaves, because a change copies its whole leaf
/// (and copying a leaf of providers clones each provider's own lists).
const fn leaf_len(size: usize, class: usize) -> usize {
    let class = if class != 0 {
        class
    } else if size >= 64 {
        4096
    } else {
        256
    };
    let n = (class - 16) / if size == 0 { 1 } else { size };
    if n == 0 {
        1
    } else if n > 64 {
        64
    } else {
        n
    }
}

type Leaf<T> = Arc<[T]>;

struct Node<T>([Option<Leaf<T>>; NODE]);

impl<T> Clone for Node<T> {
    fn clone(&self) -> Self {
        Node(self.0.clone())
    }
}

impl<T> Node<T> {
    /// Reads the count of each of its leaves and returns their sum (for
    /// `std::hint::black_box`). Copying a node counts each leaf up, and freeing one
    /// counts each down: 64 locked instructions, each of which waits for its line
    /// before the next starts, so in a cloud whose leaves are not in cache their
    /// misses come one after another. Plain reads first have them overlap, and the
    /// counting then finds every line in cache.
    fn warm(&self) -> usize {
        self.0.iter().flatten().map(Arc::strong_count).sum()
    }
}

impl<T> Drop for Node<T> {
    fn drop(&mut self) {
        // Before the fields' drops count each leaf down (see `warm`).
        std::hint::black_box(self.warm());
    }
}

/// A growable array of `len` slots, shared between versions piece by piece (see the
/// module doc). Slots past `len` in the last leaf hold `T::default()`. `CLASS`, when
/// not 0, is the size of a leaf's allocation in bytes, for slots whose copy costs
/// more than their size says (a boxed record is copied whole with its leaf).
pub struct PArray<T, const CLASS: usize = 0> {
    /// Behind an `Arc` of its own, so that a version a batch does not change shares
    /// its parent's list whole: cloning then counts one pointer rather than each
    /// node (2,186 of the 7,910 nodes of a view at a million roots are in the
    /// provider indexes, which a claim never changes).
    ///
    /// A `Vec`, so that pushes grow it in place (a load pushes millions of slots);
    /// a lookup reads the `Vec`'s pointer beside the counts, in cache after the first.
    nodes: Arc<Vec<Arc<Node<T>>>>,
    len: usize,
}

impl<T, const CLASS: usize> Clone for PArray<T, CLASS> {
    fn clone(&self) -> Self {
        PArray {
            nodes: self.nodes.clone(),
            len: self.len,
        }
    }
}

impl<T, const CLASS: usize> Default for PArray<T, CLASS> {
    fn default() -> Self {
        PArray {
            nodes: Arc::new(Vec::new()),
            len: 0,
        }
    }
}

impl<T: fmt::Debug, const CLASS: usize> fmt::Debug for PArray<T, CLASS> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T, const CLASS: usize> PArray<T, CLASS> {
    /// Slots per leaf.
    const LEAF: usize = leaf_len(std::mem::size_of::<T>(), CLASS);
    /// Slots per node.
    const NODE_SLOTS: usize = Self::LEAF * NODE;

    /// How many slots.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slot at `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        let leaf = self.nodes[i / Self::NODE_SLOTS].0[(i / Self::LEAF) % NODE].as_ref()?;
        leaf.get(i % Self::LEAF)
    }

    /// Reads the pieces that `get_mut(i)` looks at (the node's and the leaf's
    /// counters) and returns something of them. For a caller that warms a batch of
    /// scattered slots before changing them: a loop of these independent reads has
    /// their cache misses overlap, where the changes, one after another, would wait
    /// for each in turn.
    pub fn touch(&self, i: usize) -> usize {
        if i >= self.len {
            return 0;
        }
        let node = &self.nodes[i / Self::NODE_SLOTS];
        let leaf = node.0[(i / Self::LEAF) % NODE].as_ref();
        Arc::strong_count(node) + leaf.map_or(0, Arc::strong_count)
    }

    /// Every slot, in order: leaf by leaf, each a plain slice (the search walks every
    /// provider this way, so the inner loop must be a slice's).
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        let len = self.len;
        self.nodes
            .iter()
            .enumerate()
            .flat_map(move |(n, node)| {
                let start = n * Self::NODE_SLOTS;
                node.0.iter().enumerate().map_while(move |(j, leaf)| {
                    let from = start + j * Self::LEAF;
                    let leaf = leaf.as_ref().filter(|_| from < len)?;
                    Some(&leaf[..(len - from).min(Self::LEAF)])
                })
            })
            .flatten()
    }
}

impl<T: Clone + Default, const CLASS: usize> PArray<T, CLASS> {
    fn blank_leaf() -> Leaf<T> {
        (0..Self::LEAF).map(|_| T::default()).collect()
    }

    /// `len` slots of `T::default()`. They share one leaf until each is written.
    pub fn filled(len: usize) -> Self {
        let blank = Self::blank_leaf();
        let leaves = len.div_ceil(Self::LEAF);
        let nodes = (0..leaves.div_ceil(NODE))
            .map(|n| {
                let present = (leaves - n * NODE).min(NODE);
                Arc::new(Node(std::array::from_fn(|j| {
                    (j < present).then(|| blank.clone())
                })))
            })
            .collect();
        PArray {
            nodes: Arc::new(nodes),
            len,
        }
    }

    /// The slot at `i`, to change it: copies its node and leaf first if another
    /// version shares them.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i >= self.len {
            return None;
        }
        let node = &mut Arc::make_mut(&mut self.nodes)[i / Self::NODE_SLOTS];
        if Arc::strong_count(node) > 1 {
            // It is about to be copied (see `Node::warm`).
            std::hint::black_box(node.warm());
        }
        let node = Arc::make_mut(node);
        let leaf = Arc::make_mut(node.0[(i / Self::LEAF) % NODE].as_mut()?);
        leaf.get_mut(i % Self::LEAF)
    }

    /// Appends a slot.
    pub fn push(&mut self, value: T) {
        let i = self.len;
        let nodes = Arc::make_mut(&mut self.nodes);
        if i.is_multiple_of(Self::NODE_SLOTS) {
            nodes.push(Arc::new(Node(std::array::from_fn(|_| None))));
        }
        if i.is_multiple_of(Self::LEAF) {
            let node = Arc::make_mut(nodes.last_mut().expect("a node was just ensured"));
            node.0[(i / Self::LEAF) % NODE] = Some(Self::blank_leaf());
        }
        self.len += 1;
        *self.get_mut(i).expect("the slot was just made") = value;
    }

    /// Takes the last slot off.
    pub fn pop(&mut self) -> Option<T> {
        let i = self.len.checked_sub(1)?;
        let value = std::mem::take(self.get_mut(i)?);
        self.len = i;
        // The pieces `push` made for this slot go, so that the next push makes them
        // again where it expects them.
        if i.is_multiple_of(Self::LEAF) {
            let nodes = Arc::make_mut(&mut self.nodes);
            if i.is_multiple_of(Self::NODE_SLOTS) {
                nodes.pop();
            } else {
                let node = Arc::make_mut(nodes.last_mut().expect("a slot was there"));
                node.0[(i / Self::LEAF) % NODE] = None;
            }
        }
        Some(value)
    }

    /// Every slot, in order, to change them (copying every shared piece).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        let len = self.len;
        Arc::make_mut(&mut self.nodes)
            .iter_mut()
            .flat_map(|node| Arc::make_mut(node).0.iter_mut().flatten())
            .flat_map(|leaf| Arc::make_mut(leaf).iter_mut())
            .take(len)
    }
}

impl<T: Clone + Default, const CLASS: usize> FromIterator<T> for PArray<T, CLASS> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut array = PArray::default();
        for value in iter {
            array.push(value);
        }
        array
    }
}

/// An open-addressing hash table of `T`, persistent as [`PArray`] is.
///
/// The table does not hash: callers pass each value's hash, and a function that hashes
/// a value (for growing and for deletion), so the key can be read from wherever it
/// lives (the provider indexes hold ids and hash the records' uuids and names). At
/// most three quarters full, so a lookup probes about two slots on average. `CLASS`
/// sizes its leaves as [`PArray`]'s does.
pub struct PHashTable<T, const CLASS: usize = 0> {
    slots: PArray<Option<T>, CLASS>,
    len: usize,
}

impl<T, const CLASS: usize> Clone for PHashTable<T, CLASS> {
    fn clone(&self) -> Self {
        PHashTable {
            slots: self.slots.clone(),
            len: self.len,
        }
    }
}

impl<T, const CLASS: usize> Default for PHashTable<T, CLASS> {
    fn default() -> Self {
        PHashTable {
            slots: PArray::default(),
            len: 0,
        }
    }
}

impl<T: fmt::Debug, const CLASS: usize> fmt::Debug for PHashTable<T, CLASS> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl<T, const CLASS: usize> PHashTable<T, CLASS> {
    /// How many values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    /// The slot holding the value `eq` accepts, probing from `hash`'s home slot.
    fn position(&self, hash: u64, mut eq: impl FnMut(&T) -> bool) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mask = self.mask();
        let mut i = hash as usize & mask;
        loop {
            match self.slots.get(i)? {
                None => return None,
                Some(v) if eq(v) => return Some(i),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }

    /// The value `eq` accepts among those with `hash`.
    pub fn find(&self, hash: u64, eq: impl FnMut(&T) -> bool) -> Option<&T> {
        let i = self.position(hash, eq)?;
        self.slots.get(i)?.as_ref()
    }

    /// Every value, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten()
    }

    /// Reads the home slot of `hash` and what changing it looks at (see
    /// [`PArray::touch`]).
    pub fn touch(&self, hash: u64) -> usize {
        let i = hash as usize & self.mask();
        self.slots.touch(i) + self.slots.get(i).map_or(0, |s| usize::from(s.is_some()))
    }
}

impl<T: Clone, const CLASS: usize> PHashTable<T, CLASS> {
    /// The value `eq` accepts among those with `hash`, to change it (not its key).
    pub fn find_mut(&mut self, hash: u64, eq: impl FnMut(&T) -> bool) -> Option<&mut T> {
        let i = self.position(hash, eq)?;
        self.slots.get_mut(i)?.as_mut()
    }

    /// Makes room for `additional` more values without growing on the way.
    pub fn reserve(&mut self, additional: usize, hasher: impl Fn(&T) -> u64) {
        let wanted = self.len + additional;
        if wanted * 4 > self.slots.len() * 3 {
            self.rebuild((wanted * 4 / 3 + 1).next_power_of_two().max(16), hasher);
        }
    }

    /// A table of `entries` (each with its hash, none equal), built in one pass:
    /// sorted by home slot and laid down front to back, each in its home slot or the
    /// first free one after it, which is where inserting them one by one in that
    /// order would put them. Inserting them in any other order probes the table at
    /// random places, a cache miss each (a load's provider indexes: two million).
    pub fn from_hashed(mut entries: Vec<(u64, T)>, hasher: impl Fn(&T) -> u64) -> Self {
        let count = entries.len();
        // The size `reserve` would give `count` values.
        let size = (count * 4 / 3 + 1).next_power_of_two().max(16);
        let mask = size - 1;
        entries.sort_unstable_by_key(|(hash, _)| *hash as usize & mask);
        let mut slots: Vec<Option<T>> = Vec::with_capacity(size);
        // Those whose probe runs past the last slot go in after, from the first.
        let mut wrapped = Vec::new();
        for (hash, value) in entries {
            let home = hash as usize & mask;
            if home.max(slots.len()) >= size {
                wrapped.push((hash, value));
                continue;
            }
            slots.resize_with(home.max(slots.len()), || None);
            slots.push(Some(value));
        }
        slots.resize_with(size, || None);
        let mut table = PHashTable {
            slots: slots.into_iter().collect(),
            len: count - wrapped.len(),
        };
        for (hash, value) in wrapped {
            table.insert_unique(hash, value, &hasher);
        }
        table
    }

    /// Adds a value known not to be present.
    pub fn insert_unique(&mut self, hash: u64, value: T, hasher: impl Fn(&T) -> u64) {
        self.reserve(1, &hasher);
        let mask = self.mask();
        let mut i = hash as usize & mask;
        while self.slots.get(i).is_some_and(Option::is_some) {
            i = (i + 1) & mask;
        }
        *self.slots.get_mut(i).expect("probing stays in the table") = Some(value);
        self.len += 1;
    }

    /// Removes and returns the value `eq` accepts among those with `hash`.
    ///
    /// Linear probing without tombstones: every value after the hole, up to the next
    /// empty slot, that may sit earlier (its home is not between the hole and it) moves
    /// back into the hole, so that no probe sequence is cut short.
    pub fn remove(
        &mut self,
        hash: u64,
        eq: impl FnMut(&T) -> bool,
        hasher: impl Fn(&T) -> u64,
    ) -> Option<T> {
        let mut hole = self.position(hash, eq)?;
        let removed = self.slots.get_mut(hole)?.take();
        self.len -= 1;
        let mask = self.mask();
        let mut next = (hole + 1) & mask;
        while let Some(Some(v)) = self.slots.get(next) {
            let home = hasher(v) as usize & mask;
            // The distance back to its home; it may move to the hole if the hole is
            // no further from home than where it sits.
            if (next.wrapping_sub(home) & mask) >= (next.wrapping_sub(hole) & mask) {
                let moved = self.slots.get_mut(next).and_then(Option::take);
                *self.slots.get_mut(hole).expect("in the table") = moved;
                hole = next;
            }
            next = (next + 1) & mask;
        }
        removed
    }

    /// Every value, in no particular order, to change them (not their keys).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.slots.iter_mut().flatten()
    }

    fn rebuild(&mut self, slots: usize, hasher: impl Fn(&T) -> u64) {
        let old = std::mem::replace(&mut self.slots, PArray::filled(slots));
        self.len = 0;
        let mask = self.mask();
        for value in old.iter().flatten() {
            let mut i = hasher(value) as usize & mask;
            while self.slots.get(i).is_some_and(Option::is_some) {
                i = (i + 1) & mask;
            }
            *self.slots.get_mut(i).expect("probing stays in the table") = Some(value.clone());
            self.len += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn next(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    /// An array answers as a `Vec` does through any edits, and an old version (a
    /// clone) keeps the values it had while the new one changes.
    #[test]
    fn array_versions_are_independent() {
        let mut seed = 0x9e37_79b9_7f4a_7c15;
        let mut array: PArray<u64> = PArray::default();
        let mut model: Vec<u64> = Vec::new();
        let mut versions: Vec<(PArray<u64>, Vec<u64>)> = Vec::new();
        for round in 0..20_000 {
            let r = next(&mut seed);
            if r.is_multiple_of(3) || model.is_empty() {
                array.push(r);
                model.push(r);
            } else {
                let i = (r as usize / 3) % model.len();
                *array.get_mut(i).unwrap() = r;
                model[i] = r;
            }
            if round % 997 == 0 {
                versions.push((array.clone(), model.clone()));
            }
        }
        assert!(array.iter().eq(model.iter()));
        assert_eq!(array.get(model.len()), None);
        for (old, expected) in &versions {
            assert!(old.iter().eq(expected.iter()));
            assert!((0..expected.len()).all(|i| old.get(i) == Some(&expected[i])));
        }
        let many = PArray::<u8>::NODE_SLOTS + 3;
        assert_eq!(PArray::<u8>::filled(many).iter().count(), many);
        let collected: PArray<u32> = (0..5000).collect();
        assert!(collected.iter().copied().eq(0..5000));
        // Pops and pushes across leaves and nodes, as a stack does; the version
        // before them keeps its slots.
        let mut stack = collected.clone();
        let mut model: Vec<u32> = (0..5000).collect();
        for round in 0..40_000u32 {
            if next(&mut seed) % 5 < 2 {
                assert_eq!(stack.pop(), model.pop());
            } else {
                stack.push(round);
                model.push(round);
            }
            assert_eq!(stack.len(), model.len());
            assert_eq!(stack.get(model.len().wrapping_sub(1)), model.last());
        }
        while let Some(v) = stack.pop() {
            assert_eq!(Some(v), model.pop());
        }
        assert!(model.is_empty());
        stack.push(9);
        assert!(stack.iter().eq([9].iter()));
        assert!(collected.iter().copied().eq(0..5000));
    }

    /// A version no change touched shares its parent's list of nodes whole (a clone
    /// counts one pointer); the first change gives it a list of its own, and the
    /// parent keeps its values.
    #[test]
    fn an_untouched_version_shares_its_node_list() {
        let parent: PArray<u64> = (0..10_000).collect();
        let mut child = parent.clone();
        assert!(Arc::ptr_eq(&parent.nodes, &child.nodes));
        *child.get_mut(9_999).unwrap() = 7;
        assert!(!Arc::ptr_eq(&parent.nodes, &child.nodes));
        assert_eq!(parent.get(9_999), Some(&9_999));
        assert_eq!(child.get(9_999), Some(&7));
        child.push(1);
        assert_eq!((parent.len(), child.len()), (10_000, 10_001));
    }

    /// A table answers as a `HashMap` does through inserts and removes, with a hash
    /// that collides a lot (so that probing and backward shifts are exercised), and
    /// old versions stay as they were; with leaves of the default size, and with
    /// leaves of 64 bytes (3 slots, so that probes cross leaves and nodes often).
    #[test]
    fn table_behaves_as_a_map() {
        behaves_as_a_map::<0>();
        behaves_as_a_map::<64>();
    }

    fn behaves_as_a_map<const CLASS: usize>() {
        let hash = |k: &(u64, u64)| k.0 % 97;
        let mut seed = 0x2545_f491_4f6c_dd1d;
        let mut table: PHashTable<(u64, u64), CLASS> = PHashTable::default();
        let mut model: HashMap<u64, u64> = HashMap::new();
        let mut versions = Vec::new();
        for round in 0..30_000 {
            let (k, v) = (next(&mut seed) % 2000, next(&mut seed));
            let h = hash(&(k, 0));
            match next(&mut seed) % 3 {
                0 => {
                    let removed = table.remove(h, |e| e.0 == k, hash);
                    assert_eq!(removed.map(|e| e.1), model.remove(&k));
                }
                _ => match table.find_mut(h, |e| e.0 == k) {
                    Some(e) => {
                        e.1 = v;
                        model.insert(k, v);
                    }
                    None => {
                        table.insert_unique(h, (k, v), hash);
                        model.insert(k, v);
                    }
                },
            }
            assert_eq!(
                table.find(h, |e| e.0 == k).map(|e| e.1),
                model.get(&k).copied()
            );
            assert_eq!(table.len(), model.len());
            if round % 1999 == 0 {
                versions.push((table.clone(), model.clone()));
            }
        }
        for (old, expected) in &versions {
            assert_eq!(old.len(), expected.len());
            for (k, v) in expected {
                assert_eq!(
                    old.find(hash(&(*k, 0)), |e| e.0 == *k).map(|e| e.1),
                    Some(*v)
                );
            }
            let mut seen: Vec<_> = old.iter().map(|e| e.0).collect();
            seen.sort_unstable();
            let mut keys: Vec<_> = expected.keys().copied().collect();
            keys.sort_unstable();
            assert_eq!(seen, keys);
        }
    }

    /// A table built whole from hashed entries is the table inserting them one by
    /// one builds: every entry found, none lost, and removals and inserts after work.
    /// Hashes crowd a few home slots and the last ones, so runs collide and wrap.
    #[test]
    fn a_table_built_whole_behaves_as_one_built_by_inserts() {
        for count in [0, 1, 11, 12, 13, 700, 3000] {
            // Homes in a table of `size` slots: crowded near 0, in the middle, and at
            // the very end (probes run past the last slot).
            let size = (count * 4 / 3 + 1usize).next_power_of_two().max(16) as u64;
            let hash = |k: &(u64, u64)| match k.0 % 3 {
                0 => k.0 % 5,
                1 => size / 2 + k.0 % 7,
                _ => size - 1 - k.0 % 2,
            };
            let entries: Vec<(u64, (u64, u64))> = (0..count as u64)
                .map(|k| (hash(&(k, 0)), (k, k * 10)))
                .collect();
            let mut built: PHashTable<(u64, u64)> = PHashTable::from_hashed(entries, hash);
            assert_eq!(built.len(), count);
            for k in 0..count as u64 {
                assert_eq!(built.find(hash(&(k, 0)), |e| e.0 == k), Some(&(k, k * 10)));
            }
            let mut seen: Vec<u64> = built.iter().map(|e| e.0).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..count as u64).collect::<Vec<_>>());
            // Take every other one out, and put new ones in.
            for k in (0..count as u64).step_by(2) {
                assert!(built.remove(hash(&(k, 0)), |e| e.0 == k, hash).is_some());
            }
            for k in count as u64..count as u64 + 50 {
                built.insert_unique(hash(&(k, 0)), (k, k * 10), hash);
            }
            for k in 0..count as u64 + 50 {
                let present = k % 2 == 1 || k >= count as u64;
                assert_eq!(
                    built.find(hash(&(k, 0)), |e| e.0 == k).is_some(),
                    present,
                    "{k} of {count}"
                );
            }
        }
    }
}
