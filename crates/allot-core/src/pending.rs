//! A provider's pending amounts ([`PendingIndex`]), kept in shared chunks so that a
//! claim on a provider that holds thousands (a sharing pool under a mass start)
//! copies one chunk, not all of them.
//!
//! The writer makes each version of the view by cloning the last one and changing
//! the clone: a provider changed is cloned with its index. Were the entries one
//! slice, every claim on a pool would copy every claim the pool holds, twice (on the
//! pick's copy and in the batch), and the writer's time per claim would grow with
//! them. In chunks of at most [`CHUNK`] entries behind `Arc`s, a clone copies the
//! list of chunks (a pointer each) and a change copies the one chunk it touches.

use std::sync::Arc;

use uuid::Uuid;

use crate::model::{PendingAmount, Timestamp, NEVER};
use crate::names::ResourceClass;

/// The most entries a chunk holds; a full one is split in two.
const CHUNK: usize = 64;

/// Per class: the sum of the amounts and the earliest expiry.
type Totals = Box<[(ResourceClass, u64, Timestamp)]>;

/// A provider's pending amounts: the entries, one per claim and class, in (claim,
/// class) order (so that a view loaded from a store equals the view that applied the
/// same claims in another order), and beside them, per class, their sum and the
/// earliest expiry among them.
///
/// The sums are recomputed from the entries whenever the entries change (each chunk's
/// from its entries, the index's from its chunks'), never moved by differences, so
/// they cannot drift from the records; they only spare a capacity check the walk over
/// every entry (a sharing provider under a mass start holds thousands, and the
/// candidate search asks for its usage once per anchor). Until the earliest expiry
/// every entry is live and the sum is the answer; from then on, until the sweep ends
/// the expired claims, the entries are walked.
///
/// One pointer, null when empty (as nearly every provider's is): a million providers
/// carry 8 bytes each for it, not 32.
#[derive(Debug, Clone, Default)]
pub struct PendingIndex(Option<Box<Entries>>);

/// A non-empty [`PendingIndex`].
#[derive(Debug, Clone)]
struct Entries {
    /// The chunks, in order; none is empty.
    chunks: Box<[Arc<Chunk>]>,
    /// The chunks' totals added up.
    totals: Totals,
}

/// Some consecutive entries, and their totals.
#[derive(Debug)]
struct Chunk {
    entries: Box<[PendingAmount]>,
    totals: Totals,
}

impl PartialEq for PendingIndex {
    /// The same entries, however they are chunked.
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for PendingIndex {}

/// The order of the entries.
fn key(e: &PendingAmount) -> (Uuid, &str) {
    (e.claim, e.class.as_str())
}

/// Per class, the sum and earliest expiry of `items` (class, amount, expiry).
fn totals<'a>(items: impl Iterator<Item = (&'a ResourceClass, u64, Timestamp)>) -> Totals {
    let mut totals: Vec<(ResourceClass, u64, Timestamp)> = Vec::new();
    for (class, amount, expires_at) in items {
        match totals.iter_mut().find(|(c, _, _)| c == class) {
            Some((_, total, first)) => {
                *total = total.saturating_add(amount);
                *first = (*first).min(expires_at);
            }
            None => totals.push((class.clone(), amount, expires_at)),
        }
    }
    totals.sort_by(|a, b| a.0.cmp(&b.0));
    totals.into_boxed_slice()
}

impl Chunk {
    fn new(entries: Vec<PendingAmount>) -> Arc<Chunk> {
        let totals = totals(entries.iter().map(|e| (&e.class, e.amount, e.expires_at)));
        Arc::new(Chunk {
            entries: entries.into_boxed_slice(),
            totals,
        })
    }
}

impl PendingIndex {
    /// The entries, in order.
    pub fn iter(&self) -> impl Iterator<Item = &PendingAmount> {
        self.0
            .iter()
            .flat_map(|p| p.chunks.iter().flat_map(|c| c.entries.iter()))
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Per class present: the sum of the amounts and the earliest expiry.
    fn totals(&self) -> &[(ResourceClass, u64, Timestamp)] {
        self.0.as_ref().map_or(&[], |p| &p.totals)
    }

    /// How much of `class` the live entries promise at `now`.
    pub fn sum(&self, class: &str, now: Timestamp) -> u64 {
        match self.totals().iter().find(|(c, _, _)| c.as_str() == class) {
            None => 0,
            Some(&(_, total, first_expiry)) if now < first_expiry => total,
            Some(_) => self
                .iter()
                .filter(|e| e.class.as_str() == class && e.live(now))
                .map(|e| e.amount)
                .sum(),
        }
    }

    /// The first instant after `now` at which an entry of `class` that is live at
    /// `now` stops counting ([`NEVER`] if none does): until then, [`PendingIndex::sum`]
    /// of the class cannot fall.
    pub fn next_expiry(&self, class: &str, now: Timestamp) -> Timestamp {
        match self.totals().iter().find(|(c, _, _)| c.as_str() == class) {
            None => NEVER,
            Some(&(_, _, first_expiry)) if now < first_expiry => first_expiry,
            Some(_) => self
                .iter()
                .filter(|e| e.class.as_str() == class && e.live(now))
                .map(|e| e.expires_at)
                .min()
                .unwrap_or(NEVER),
        }
    }

    /// Adds an entry in its place: copies the one chunk it goes into.
    pub fn insert(&mut self, entry: PendingAmount) {
        let Some(p) = &self.0 else {
            self.set(vec![entry]);
            return;
        };
        // The first chunk whose last entry comes after the new one, else the last.
        let at = p
            .chunks
            .partition_point(|c| c.entries.last().is_some_and(|l| key(l) < key(&entry)))
            .min(p.chunks.len() - 1);
        let mut entries = p.chunks[at].entries.to_vec();
        let i = entries.partition_point(|e| key(e) < key(&entry));
        entries.insert(i, entry);
        let mut chunks: Vec<Arc<Chunk>> = Vec::with_capacity(p.chunks.len() + 1);
        chunks.extend_from_slice(&p.chunks[..at]);
        if entries.len() > CHUNK {
            let second = entries.split_off(entries.len() / 2);
            chunks.push(Chunk::new(entries));
            chunks.push(Chunk::new(second));
        } else {
            chunks.push(Chunk::new(entries));
        }
        chunks.extend_from_slice(&p.chunks[at + 1..]);
        self.set_chunks(chunks);
    }

    /// Drops a claim's entries; whether it had any. Copies the chunks they were in.
    pub fn remove_claim(&mut self, claim: Uuid) -> bool {
        let Some(p) = &self.0 else {
            return false;
        };
        let holds = |c: &Chunk| c.entries.iter().any(|e| e.claim == claim);
        if !p.chunks.iter().any(|c| holds(c)) {
            return false;
        }
        let chunks: Vec<Arc<Chunk>> = p
            .chunks
            .iter()
            .filter_map(|c| {
                if !holds(c) {
                    return Some(c.clone());
                }
                let kept: Vec<PendingAmount> = c
                    .entries
                    .iter()
                    .filter(|e| e.claim != claim)
                    .cloned()
                    .collect();
                (!kept.is_empty()).then(|| Chunk::new(kept))
            })
            .collect();
        self.set_chunks(chunks);
        true
    }

    /// Renames a class in every entry.
    pub fn rename_class(&mut self, old: &ResourceClass, new: &ResourceClass) {
        if !self.iter().any(|e| e.class == *old) {
            return;
        }
        let mut list: Vec<PendingAmount> = self.iter().cloned().collect();
        for e in list.iter_mut().filter(|e| e.class == *old) {
            e.class = new.clone();
        }
        list.sort_by(|a, b| key(a).cmp(&key(b)));
        self.set(list);
    }

    /// Takes `entries` (in order), in full chunks.
    fn set(&mut self, mut entries: Vec<PendingAmount>) {
        let mut chunks = Vec::with_capacity(entries.len().div_ceil(CHUNK));
        while entries.len() > CHUNK {
            let rest = entries.split_off(CHUNK);
            chunks.push(Chunk::new(std::mem::replace(&mut entries, rest)));
        }
        if !entries.is_empty() {
            chunks.push(Chunk::new(entries));
        }
        self.set_chunks(chunks);
    }

    /// Takes `chunks` (in order, none empty) and adds up their totals.
    fn set_chunks(&mut self, chunks: Vec<Arc<Chunk>>) {
        let totals = totals(chunks.iter().flat_map(|c| {
            c.totals
                .iter()
                .map(|(class, sum, first)| (class, *sum, *first))
        }));
        self.0 = (!chunks.is_empty()).then(|| {
            Box::new(Entries {
                chunks: chunks.into_boxed_slice(),
                totals,
            })
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(claim: u128, class: &str, amount: u64, expires_at: Timestamp) -> PendingAmount {
        PendingAmount {
            claim: Uuid::from_u128(claim),
            consumer: Uuid::from_u128(claim),
            class: ResourceClass::new_unchecked(class),
            amount,
            expires_at,
        }
    }

    /// Entries added in any order, and some removed, read back in order, with sums
    /// and expiries as a walk over them gives, across many chunks.
    #[test]
    fn chunks_hold_the_entries_in_order_and_their_totals() {
        let mut index = PendingIndex::default();
        let mut want: Vec<PendingAmount> = Vec::new();
        // A scatter of claim numbers, so that inserts land in every chunk.
        for n in 0..1000u128 {
            let claim = (n * 7919) % 1000;
            for class in ["DISK_GB", "VCPU"] {
                let e = entry(
                    claim,
                    class,
                    1 + (claim % 5) as u64,
                    100 + (claim % 300) as i64,
                );
                index.insert(e.clone());
                want.push(e);
            }
            if n % 3 == 0 {
                let gone = Uuid::from_u128((n * 31) % 1000);
                let had = want.iter().any(|e| e.claim == gone);
                assert_eq!(index.remove_claim(gone), had);
                want.retain(|e| e.claim != gone);
            }
        }
        want.sort_by(|a, b| key(a).cmp(&key(b)));
        assert!(index.iter().eq(want.iter()));
        assert_eq!(index.iter().count(), want.len());
        assert!(index.0.as_ref().unwrap().chunks.len() > 10);
        for now in [0, 150, 250, 399, 400] {
            for class in ["DISK_GB", "VCPU", "VGPU"] {
                let live = want
                    .iter()
                    .filter(|e| e.class.as_str() == class && e.live(now));
                let sum: u64 = live.clone().map(|e| e.amount).sum();
                let next = live.map(|e| e.expires_at).min().unwrap_or(NEVER);
                assert_eq!(index.sum(class, now), sum, "{class} at {now}");
                assert_eq!(index.next_expiry(class, now), next, "{class} at {now}");
            }
        }
        // Equal to the same entries set at once, chunked otherwise.
        let mut again = PendingIndex::default();
        again.set(want.clone());
        assert_eq!(again, index);
        for e in &want {
            index.remove_claim(e.claim);
        }
        assert!(index.is_empty());
        assert_eq!(index.sum("VCPU", 0), 0);
    }
}
