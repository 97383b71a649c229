//! The weighed walk's kept orders: a pick's anchors in order of their bounds, kept
//! from one pick to the next instead of computed for every anchor each time.
//!
//! A `spread` pick walks the anchors least bound first (`super::walk`). Computing every
//! anchor's bound for each pick costs the whole cloud; but between two picks of a
//! mass start little changes, and what changes mostly *grows*: the claims just made.
//! A bound computed before usage grew is still a bound (lower than or equal to the
//! true one), only a stale one. So an [`Order`] keeps, for one shape of query,
//! entries `(key, anchor)` for every anchor that may have a candidate, each key at
//! most the anchor's true bound; the walk takes entries least first, computes the
//! anchor's bound again, and either visits the anchor (the bound was true) or puts
//! the entry back with the true bound (it was stale). The order the walk follows is
//! the true bounds' order, so the answer is the full order's, as `super::walk` says.
//!
//! A pool serves hundreds or thousands of roots, and each claim on it raises all
//! their bounds at once: a key with the pool's term in it would be stale for every
//! one of them after every pick. So an anchor whose pools offer one of the requested
//! classes has two entries, one per way of getting that class, as its bound is the
//! better of the two: in the first list keyed by its whole bound with its own
//! provider's term of that class (if one has room), and in the list of its set of
//! pools keyed by the other classes' terms alone; the walk adds the pools' best term
//! of the moment to every key of that list when it compares them, so a claim on a
//! pool moves no entry. The walk takes the least entry over all lists; when that
//! entry is true, no other entry of the anchor is below it, so it is the anchor's
//! bound. (An anchor whose pools offer two of the classes, or whose set of pools
//! comes after [`MAX_POOLED_LISTS`] others, has one entry, the pools' terms in it.)
//!
//! What keeps every entry at most what it stands for:
//! - the order is used only by a version of the view that descends from the one it
//!   was last brought up to date on (its id is in the version's history,
//!   `crate::state::history`), and catches up with what the history says happened
//!   since: growth needs nothing; what was lowered on some providers has their
//!   anchors' entries computed again (new entries are added; the old, higher ones
//!   are dropped when they come up, as the anchor has been seen); anything else (a
//!   sharing provider changed, which serves many trees) rebuilds the order;
//! - a pending claim counted in an anchor's entries stops counting at its expiry,
//!   which no change records: the order notes, per anchor, the earliest such expiry,
//!   and computes the anchor's entries again once it has passed. A pool's claims are
//!   read afresh by every walk, except where a pool's term is in a key: then the
//!   order is rebuilt from the earliest expiry among the pools;
//! - an anchor without a bound (nothing fits there, or a rule the anchor fails) is
//!   left out, and comes back through a change that lowers something there, or at
//!   the expiry of a pending claim that left it without one: its own providers'
//!   noted as above, and its pools' too where their terms are in its bound (a pool
//!   without room for a class that no own provider gives leaves it out).
//!
//! Only picks use kept orders (they run in the writer, one at a time, so the lock is
//! never waited on); readers on older versions compute bounds afresh. At most
//! [`MAX_ORDERS`] shapes are kept, the least recently used dropped first.

use std::collections::{BTreeSet, HashSet};

use crate::model::{Provider, ProviderId, Timestamp, NEVER};
use crate::state::history::Effect;

use super::search::Budget;
use super::walk::{Parts, Walk};
use super::weigh::Load;
use super::{AllocationRequest, CandidateQuery, Sort};

/// How many shapes of query keep an order.
pub const MAX_ORDERS: usize = 4;

/// How many lists of an order may leave a pools' term out of their keys: anchors
/// of further sets of pools have it in their keys, in the first list.
const MAX_POOLED_LISTS: usize = 64;

/// The kept orders of a view (shared by its versions, see [`State`]).
#[derive(Debug, Default)]
pub struct Orders(Vec<Order>);

/// One shape's kept order.
#[derive(Debug)]
struct Order {
    /// The query, its `now` and `limit` cleared.
    shape: CandidateQuery,
    /// The id of the version whose true bounds the entries do not exceed.
    stamp: u64,
    /// From this instant a pool's claim counted in a key may have stopped counting.
    valid_until: Timestamp,
    /// The entries: in the first list keyed by whole bounds; in each other, by
    /// bounds without the term of one set of pools (see the module doc).
    lists: Vec<List>,
    /// `(expiry, anchor)`: from `expiry` on, a claim counted in the anchor's keys
    /// has stopped counting.
    expiring: BTreeSet<(Timestamp, ProviderId)>,
    /// How many entries the order had when it was built: when stale entries make it
    /// more than twice as long, it is built again.
    built_with: usize,
}

/// One list of an order's entries.
#[derive(Debug, Default)]
struct List {
    /// For all but the first: the requested class, its amount and the pools whose
    /// best term of it is added to every key when keys are compared.
    pooled: Option<(usize, u64, Box<[ProviderId]>)>,
    /// `(key, anchor)`, least first: the key is a bound's sum (every bound of the
    /// shape has as many terms), at most `u64::MAX`; an anchor may have older,
    /// higher entries.
    entries: BTreeSet<(u64, ProviderId)>,
}

/// An anchor's keys: for the first list (None: no entry there), and for the list
/// of its pools, with that list's index.
struct Keys {
    whole: Option<u64>,
    pooled: Option<(usize, u64)>,
}

/// A key as kept: sums above `u64::MAX` (an anchor loaded billions of times over)
/// are kept as `u64::MAX`, and a walk that meets one gives up.
fn key(sum: u128) -> u64 {
    u64::try_from(sum).unwrap_or(u64::MAX)
}

impl Orders {
    /// Takes the order of `shape` out, if there is one.
    fn take(&mut self, shape: &CandidateQuery) -> Option<Order> {
        let at = self.0.iter().position(|o| o.shape == *shape)?;
        Some(self.0.remove(at))
    }

    /// Puts an order back, as the most recently used.
    fn put(&mut self, order: Order) {
        if self.0.len() >= MAX_ORDERS {
            self.0.remove(0);
        }
        self.0.push(order);
    }
}

impl Order {
    /// How many entries the lists hold.
    fn len(&self) -> usize {
        self.lists.iter().map(|l| l.entries.len()).sum()
    }
}

/// The shape a kept order is for.
fn shape_of(query: &CandidateQuery) -> CandidateQuery {
    CandidateQuery {
        now: 0,
        limit: None,
        ..query.clone()
    }
}

/// The lists' heads while a walk runs: `(key with the pools' term, anchor, list)`,
/// least first. A head is pushed whenever a list's first entry may have changed;
/// one that is no longer its list's first is passed over when it comes up.
struct Heads {
    heads: BTreeSet<(u128, ProviderId, usize)>,
    /// Per list, the term added to its keys (None: its pools have no room, and its
    /// entries stand for no candidate now).
    offsets: Vec<Option<u128>>,
}

impl Heads {
    /// Pushes list `i`'s first entry.
    fn push(&mut self, order: &Order, i: usize) {
        if let (Some(&Some(offset)), Some(&(key, anchor))) =
            (self.offsets.get(i), order.lists[i].entries.first())
        {
            self.heads.insert((u128::from(key) + offset, anchor, i));
        }
    }

    /// The least entry of all lists: `(its key with the pools' term, anchor, list,
    /// key as kept)`.
    fn least(&mut self, order: &Order) -> Option<(u128, ProviderId, usize, u64)> {
        while let Some(&(sum, anchor, i)) = self.heads.first() {
            let offset = self.offsets[i].unwrap_or(0);
            match order.lists[i].entries.first() {
                Some(&(key, at)) if at == anchor && u128::from(key) + offset == sum => {
                    return Some((sum, anchor, i, key))
                }
                _ => {
                    self.heads.pop_first();
                }
            }
        }
        None
    }
}

impl<'s> Walk<'_, 's, '_, '_> {
    /// [`Walk::run`] for a `spread` pick, on the order kept for the query's shape
    /// (built if there is none, or none that holds for the view); None when the walk
    /// gave up.
    pub(super) fn run_kept(&self, budget: &mut Budget) -> Option<Vec<AllocationRequest>> {
        debug_assert_eq!(self.sort, Sort::Spread, "a kept order holds lower bounds");
        let state = self.prep.state;
        let shape = shape_of(self.prep.query);
        let mut orders = state
            .orders
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Out of the list while it is walked: should the walk panic, it is gone, not
        // left half walked.
        let mut order = orders
            .take(&shape)
            .and_then(|order| self.catch_up(order))
            .unwrap_or_else(|| self.build(shape));
        let mut heads = Heads {
            heads: BTreeSet::new(),
            offsets: order
                .lists
                .iter()
                .map(|list| match &list.pooled {
                    None => Some(0),
                    Some((k, amount, pools)) => self.pools_term(*k, *amount, pools),
                })
                .collect(),
        };
        for i in 0..order.lists.len() {
            heads.push(&order, i);
        }
        let terms = self.terms();
        let mut progress = self.start(budget);
        // The entries found true in this walk, by list and anchor.
        let mut seen: HashSet<(usize, ProviderId)> = HashSet::new();
        let mut visited: Vec<(usize, u64, ProviderId)> = Vec::new();
        let mut anchors_visited: HashSet<ProviderId> = HashSet::new();
        let mut pools = Vec::new();
        let mut gave_up = false;
        while let Some((sum, anchor, i, stale)) = heads.least(&order) {
            if stale == u64::MAX {
                gave_up = true;
                break;
            }
            if self.done(&progress, &Load::of(sum, terms)?, anchor) {
                break;
            }
            order.lists[i].entries.pop_first();
            heads.push(&order, i);
            if seen.contains(&(i, anchor)) {
                // An older entry of one found true.
                continue;
            }
            let Some(keys) = state
                .provider(anchor)
                .filter(|p| p.row.parent.is_none())
                .and_then(|p| self.keys_at(&mut order, p, &mut pools))
            else {
                continue;
            };
            let now = if i == 0 {
                keys.whole
            } else {
                keys.pooled.filter(|p| p.0 == i).map(|p| p.1)
            };
            let Some(now) = now else {
                // No entry of the anchor belongs in this list any more.
                continue;
            };
            if now != stale {
                // Stale (lower), or an older entry of an anchor whose lowered key is
                // ahead of it: in its place, by its true key.
                order.lists[i].entries.insert((now, anchor));
                heads.push(&order, i);
                continue;
            }
            // True: no entry of any list is below it, and each is at most what it
            // stands for, so this is the anchor's bound.
            seen.insert((i, anchor));
            visited.push((i, now, anchor));
            if !anchors_visited.insert(anchor) {
                continue;
            }
            if self.visit(anchor, &mut progress).is_err() {
                gave_up = true;
                break;
            }
            if self.exhausted(&progress) {
                break;
            }
        }
        for (i, key, anchor) in visited {
            order.lists[i].entries.insert((key, anchor));
        }
        order.stamp = state.history.current();
        orders.put(order);
        if gave_up {
            return None;
        }
        Some(self.finish(progress, budget))
    }

    /// Where `anchor`'s entries go, its pending claims' expiry noted in `order` (see
    /// [`Keys`]); None when it has no bound.
    fn keys_at(
        &self,
        order: &mut Order,
        anchor: &'s Provider,
        pools: &mut Vec<ProviderId>,
    ) -> Option<Keys> {
        self.next_expiry.set(NEVER);
        let parts: Option<Parts> = self.parts_at(anchor, pools);
        if self.next_expiry.get() < NEVER {
            order.expiring.insert((self.next_expiry.get(), anchor.id()));
        }
        let parts = parts?;
        let mut keys = Keys {
            whole: None,
            pooled: None,
        };
        let list = parts
            .shared
            .and_then(|(k, amount, _)| order.list_for(k, amount, pools));
        match (parts.shared, list) {
            (Some((_, _, local)), Some(list)) => {
                keys.whole = local.map(|term| key(parts.rest + term));
                keys.pooled = Some((list, key(parts.rest)));
            }
            _ => {
                // The pools' terms are in the key: it is stale when they change.
                // Noted before the key is known: pools without room that leave the
                // anchor without one may have room at that expiry too.
                if parts.shared.is_some() || parts.pooled_rest {
                    order.valid_until = order.valid_until.min(self.pool_expiry.get());
                }
                keys.whole = Some(key(self.whole(&parts, pools)?));
            }
        }
        Some(keys)
    }

    /// Adds `anchor`'s entries to `order`.
    fn enter(&self, order: &mut Order, anchor: &'s Provider, pools: &mut Vec<ProviderId>) {
        let Some(keys) = self.keys_at(order, anchor, pools) else {
            return;
        };
        if let Some(whole) = keys.whole {
            order.lists[0].entries.insert((whole, anchor.id()));
        }
        if let Some((i, key)) = keys.pooled {
            order.lists[i].entries.insert((key, anchor.id()));
        }
    }

    /// Every anchor's entries, in a new order for `shape`.
    fn build(&self, shape: CandidateQuery) -> Order {
        let mut order = Order {
            shape,
            stamp: self.prep.state.history.current(),
            valid_until: NEVER,
            lists: vec![List::default()],
            expiring: BTreeSet::new(),
            built_with: 0,
        };
        let mut pools = Vec::new();
        for anchor in self.prep.anchors() {
            self.enter(&mut order, anchor, &mut pools);
        }
        order.built_with = order.len();
        order
    }

    /// `order` brought up to date with what happened since its stamp (see the module
    /// doc), or None when it cannot be (it is to be built again).
    fn catch_up(&self, mut order: Order) -> Option<Order> {
        let state = self.prep.state;
        let now = self.prep.query.now;
        if now >= order.valid_until || order.len() > 2 * order.built_with + 1024 {
            return None;
        }
        let mut roots: Vec<ProviderId> = Vec::new();
        for entry in state.history.since(order.stamp)? {
            match &entry.effect {
                Effect::Grew => {}
                Effect::Everything => return None,
                Effect::Lowered(ids) => roots.extend(
                    ids.iter()
                        .filter_map(|id| state.provider(*id))
                        .map(|p| p.row.root),
                ),
            }
        }
        while let Some(&(expiry, root)) = order.expiring.first() {
            if expiry > now {
                break;
            }
            order.expiring.pop_first();
            roots.push(root);
        }
        roots.sort_unstable();
        roots.dedup();
        let mut pools = Vec::new();
        for root in roots {
            if let Some(anchor) = state.provider(root) {
                self.enter(&mut order, anchor, &mut pools);
            }
        }
        Some(order)
    }
}

impl Order {
    /// The list whose keys leave out the best term of class `k` among `pools`, made
    /// if there is none and room for one.
    fn list_for(&mut self, k: usize, amount: u64, pools: &[ProviderId]) -> Option<usize> {
        let found = self.lists.iter().position(|list| {
            list.pooled
                .as_ref()
                .is_some_and(|(kk, a, p)| (*kk, *a) == (k, amount) && **p == *pools)
        });
        if found.is_some() {
            return found;
        }
        if self.lists.len() > MAX_POOLED_LISTS {
            return None;
        }
        self.lists.push(List {
            pooled: Some((k, amount, pools.into())),
            entries: BTreeSet::new(),
        });
        Some(self.lists.len() - 1)
    }
}
