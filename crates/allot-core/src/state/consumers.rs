//! The view's consumers: their records in slots, in the order they came, and an index
//! from uuid to slot.
//!
//! Why not one hash table of records, as before (docs/design/consumer-table.md): a
//! claim for a new consumer then put it in a slot at a random place, so the writer
//! copied that slot's leaf, cloning each record in it with its allocations, and the old
//! version's free dropped them again. In a million-root cloud those records are cold,
//! and that copy (and the free) was about a third of what a claim's work on the view
//! grew by with the cloud. Here a new consumer goes in the last slot (or a slot a
//! deleted consumer left), so a batch of claims copies the last leaf once and fills it
//! in place; what goes at a random place is the index's entry, a slot number of four
//! bytes, in a leaf that copies as plain memory.
//!
//! Slots a deleted consumer leaves are filled first, so that churn does not grow the
//! array: their numbers wait on a stack (`free`), whose pushes and pops change only
//! its last leaf.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::num::NonZeroU32;

use uuid::Uuid;

use crate::model::Consumer;
use crate::persistent::{PArray, PHashTable};

/// The size in bytes of a leaf of records: 14 slots, where the default for pointers
/// is 30. Changing an existing consumer copies its leaf, and a leaf of boxes is copied
/// record by record, each with its allocations (and freed so once the old version
/// goes): fewer to copy made the writer's work on the view 8 µs per claim cheaper at
/// a million roots when the records were a hash table's (docs/design/view-copies.md).
const LEAF_BYTES: usize = 128;

/// A slot of the records' array: a consumer's record, boxed so that an empty slot
/// costs a pointer, or `None` (a deleted consumer's, to be filled again).
type Slot = Option<Box<Consumer>>;

/// Consumers by uuid (see the module doc). Every method that hashes takes the view's
/// hasher: the view hashes provider uuids and names with the same one.
#[derive(Debug, Clone, Default)]
pub(crate) struct Consumers {
    slots: PArray<Slot, LEAF_BYTES>,
    /// Slot numbers, plus one, by the uuid of the record there.
    index: PHashTable<NonZeroU32>,
    /// The numbers of the empty slots.
    free: PArray<u32>,
}

/// The record an index entry names (entries are slot numbers plus one).
fn record(slots: &PArray<Slot, LEAF_BYTES>, entry: NonZeroU32) -> &Consumer {
    slots
        .get(entry.get() as usize - 1)
        .and_then(Option::as_deref)
        .expect("the index names held slots only")
}

impl Consumers {
    /// How many consumers.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The slot holding `uuid`'s record.
    fn position(&self, hasher: &RandomState, uuid: &Uuid) -> Option<usize> {
        let slots = &self.slots;
        self.index
            .find(hasher.hash_one(uuid), |&e| {
                record(slots, e).row.uuid == *uuid
            })
            .map(|e| e.get() as usize - 1)
    }

    /// The consumer `uuid`.
    #[inline]
    pub(crate) fn get(&self, hasher: &RandomState, uuid: &Uuid) -> Option<&Consumer> {
        let i = self.position(hasher, uuid)?;
        self.slots.get(i).and_then(Option::as_deref)
    }

    /// The consumer `uuid`, to change it (not its uuid).
    pub(crate) fn get_mut(&mut self, hasher: &RandomState, uuid: &Uuid) -> Option<&mut Consumer> {
        let i = self.position(hasher, uuid)?;
        self.slots.get_mut(i)?.as_deref_mut()
    }

    /// Makes room for `additional` more consumers without rehashing on the way.
    pub(crate) fn reserve(&mut self, hasher: &RandomState, additional: usize) {
        let slots = &self.slots;
        self.index
            .reserve(additional, |&e| hasher.hash_one(record(slots, e).row.uuid));
    }

    /// Adds a consumer, on the caller's word that none with its uuid is here: in the
    /// slot a deleted one left last, or at the end.
    pub(crate) fn insert_new(&mut self, hasher: &RandomState, consumer: Box<Consumer>) {
        let hash = hasher.hash_one(consumer.row.uuid);
        let i = match self.free.pop() {
            Some(i) => {
                let slot = self
                    .slots
                    .get_mut(i as usize)
                    .expect("free slots are in the array");
                debug_assert!(slot.is_none(), "the free list names empty slots only");
                *slot = Some(consumer);
                i as usize
            }
            None => {
                self.slots.push(Some(consumer));
                self.slots.len() - 1
            }
        };
        let entry = u32::try_from(i + 1)
            .ok()
            .and_then(NonZeroU32::new)
            .expect("fewer than 4 billion consumers");
        let slots = &self.slots;
        self.index
            .insert_unique(hash, entry, |&e| hasher.hash_one(record(slots, e).row.uuid));
    }

    /// Removes the consumer `uuid` and returns its record; its slot is filled again
    /// first.
    pub(crate) fn remove(&mut self, hasher: &RandomState, uuid: &Uuid) -> Option<Box<Consumer>> {
        let slots = &self.slots;
        let entry = self.index.remove(
            hasher.hash_one(uuid),
            |&e| record(slots, e).row.uuid == *uuid,
            |&e| hasher.hash_one(record(slots, e).row.uuid),
        )?;
        let i = entry.get() - 1;
        let consumer = self.slots.get_mut(i as usize).and_then(Option::take);
        debug_assert!(consumer.is_some(), "the index names held slots only");
        self.free.push(i);
        consumer
    }

    /// Every consumer, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Consumer> {
        self.slots.iter().filter_map(Option::as_deref)
    }

    /// Every consumer, in no particular order, to change them (not their uuids).
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Consumer> {
        self.slots.iter_mut().filter_map(Option::as_deref_mut)
    }

    /// Reads what inserting `uuid` will look at (its index slot, and the array's
    /// last leaf), for a loader warming a batch (see `State::warm_consumers`).
    pub(crate) fn touch(&self, hasher: &RandomState, uuid: &Uuid) -> usize {
        self.index.touch(hasher.hash_one(uuid)) + self.slots.touch(self.slots.len().max(1) - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ConsumerRow;
    use std::collections::HashMap;

    fn consumer(uuid: Uuid, generation: u64) -> Box<Consumer> {
        Box::new(Consumer {
            row: ConsumerRow {
                uuid,
                project_id: "p".into(),
                user_id: "u".into(),
                consumer_type: None,
                generation,
                created_at: 0,
                updated_at: 0,
            },
            allocations: Box::default(),
        })
    }

    /// The table answers as a map does through inserts, changes and removes, reuses
    /// the slots removes free (the array grows only past the most ever held at once),
    /// and old versions keep what they held.
    #[test]
    fn consumers_behave_as_a_map_and_reuse_freed_slots() {
        let hasher = RandomState::new();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut table = Consumers::default();
        let mut model: HashMap<Uuid, u64> = HashMap::new();
        let mut versions = Vec::new();
        let mut most = 0;
        for round in 0..20_000u64 {
            let uuid = Uuid::from_u128(u128::from(next() % 3_000));
            match next() % 3 {
                0 => {
                    let removed = table.remove(&hasher, &uuid).map(|c| c.row.generation);
                    assert_eq!(removed, model.remove(&uuid));
                }
                _ => match table.get_mut(&hasher, &uuid) {
                    Some(c) => {
                        c.row.generation = round;
                        model.insert(uuid, round);
                    }
                    None => {
                        table.insert_new(&hasher, consumer(uuid, round));
                        model.insert(uuid, round);
                    }
                },
            }
            most = most.max(model.len());
            assert_eq!(table.len(), model.len());
            assert_eq!(
                table.get(&hasher, &uuid).map(|c| c.row.generation),
                model.get(&uuid).copied()
            );
            if round % 1_999 == 0 {
                versions.push((table.clone(), model.clone()));
            }
        }
        assert_eq!(table.slots.len(), most, "freed slots are filled first");
        for (old, expected) in &versions {
            let mut held: Vec<(Uuid, u64)> =
                old.iter().map(|c| (c.row.uuid, c.row.generation)).collect();
            held.sort_unstable();
            let mut want: Vec<(Uuid, u64)> = expected.iter().map(|(u, g)| (*u, *g)).collect();
            want.sort_unstable();
            assert_eq!(held, want);
        }
        for c in table.iter_mut() {
            c.row.generation = 0;
        }
        assert!(table.iter().all(|c| c.row.generation == 0));
        assert_eq!(table.iter().count(), model.len());
    }
}
