//! The weighed walk's kept orders: a pick's anchors in order of their bounds, kept
//! from one pick to the next instead of computed for every anchor each time.
//!
//! A `spread` pick walks the anchors least bound first (`super::walk`). Computing every
//! anchor's bound for each pick costs the whole cloud; but between two picks of a
//! mass start little changes, and what changes mostly *grows*: the claims just made.
//! A bound computed before usage grew is still a bound (lower than or equal to the
//! true one), only a stale one. So an [`Order`] keeps, for one shape of query, an
//! entry `(bound, anchor)` for every anchor that may have a candidate, each bound at
//! most the anchor's true bound; the walk takes entries least first, computes the
//! anchor's bound again, and either visits the anchor (the bound was true) or puts
//! the entry back with the true bound (it was stale). The order the walk follows is
//! the true bounds' order, so the answer is the full order's, as `super::walk` says.
//!
//! What keeps every entry at most its anchor's true bound:
//! - the order is used only by a version of the view that descends from the one it
//!   was last brought up to date on (its id is in the version's history,
//!   `crate::state::history`), and catches up with what the history says happened
//!   since: growth needs nothing; what was lowered on some providers has their
//!   anchors' bounds computed again (an entry with the new bound is added; the old,
//!   higher one is dropped when it comes up, as the anchor has been seen); anything
//!   else (a sharing provider changed, which serves many trees) rebuilds the order;
//! - a pending claim counted in a bound stops counting at its expiry, which no change
//!   records: the order is rebuilt from the earliest such expiry on;
//! - an anchor without a bound (nothing fits there, or a rule the anchor fails) is
//!   left out, and comes back only through a change that lowers something there.
//!
//! Only picks use kept orders (they run in the writer, one at a time, so the lock is
//! never waited on); readers on older versions compute bounds afresh. At most
//! [`MAX_ORDERS`] shapes are kept, the least recently used dropped first.

use std::collections::{BTreeSet, HashSet};

use crate::model::{ProviderId, Timestamp, NEVER};
use crate::state::history::Effect;

use super::search::Budget;
use super::walk::Walk;
use super::weigh::Load;
use super::{AllocationRequest, CandidateQuery, Sort};

/// How many shapes of query keep an order.
pub const MAX_ORDERS: usize = 4;

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
    /// From this instant a claim counted in a bound may have stopped counting.
    valid_until: Timestamp,
    /// `(bound, anchor)`, least first; an anchor may have older, higher entries.
    entries: BTreeSet<(Load, ProviderId)>,
    /// How many anchors had a bound when the order was built: when stale entries
    /// make it more than twice as long, it is built again.
    built_with: usize,
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

/// The shape a kept order is for.
fn shape_of(query: &CandidateQuery) -> CandidateQuery {
    CandidateQuery {
        now: 0,
        limit: None,
        ..query.clone()
    }
}

impl Walk<'_, '_, '_, '_> {
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
        let mut progress = self.start(budget);
        let mut seen: HashSet<ProviderId> = HashSet::new();
        let mut visited: Vec<(Load, ProviderId)> = Vec::new();
        let mut gave_up = false;
        while let Some(&(stale, anchor)) = order.entries.first() {
            if self.done(&progress, &stale, anchor) {
                break;
            }
            order.entries.pop_first();
            if seen.contains(&anchor) {
                // An older entry of an anchor already visited.
                continue;
            }
            let Some(bound) = state
                .provider(anchor)
                .filter(|p| p.row.parent.is_none())
                .and_then(|p| self.bound_at(p))
            else {
                continue;
            };
            if bound != stale {
                // Stale (lower), or an older entry of an anchor whose lowered bound
                // is ahead of it: in its place, by its true bound.
                order.entries.insert((bound, anchor));
                continue;
            }
            seen.insert(anchor);
            visited.push((bound, anchor));
            if self.visit(anchor, &mut progress).is_err() {
                gave_up = true;
                break;
            }
            if self.exhausted(&progress) {
                break;
            }
        }
        order.entries.extend(visited);
        order.stamp = state.history.current();
        order.valid_until = order.valid_until.min(self.next_expiry.get());
        orders.put(order);
        if gave_up {
            return None;
        }
        Some(self.finish(progress, budget))
    }

    /// Every anchor's bound, in a new order for `shape`.
    fn build(&self, shape: CandidateQuery) -> Order {
        let prep = self.prep;
        self.next_expiry.set(NEVER);
        let entries: BTreeSet<(Load, ProviderId)> = prep
            .anchors()
            .filter_map(|anchor| Some((self.bound_at(anchor)?, anchor.id())))
            .collect();
        Order {
            shape,
            stamp: prep.state.history.current(),
            valid_until: self.next_expiry.get(),
            built_with: entries.len(),
            entries,
        }
    }

    /// `order` brought up to date with what happened since its stamp (see the module
    /// doc), or None when it cannot be (it is to be built again).
    fn catch_up(&self, mut order: Order) -> Option<Order> {
        let state = self.prep.state;
        if self.prep.query.now >= order.valid_until
            || order.entries.len() > 2 * order.built_with + 1024
        {
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
        roots.sort_unstable();
        roots.dedup();
        for root in roots {
            let Some(anchor) = state.provider(root) else {
                continue;
            };
            if let Some(bound) = self.bound_at(anchor) {
                order.entries.insert((bound, root));
            }
        }
        Some(order)
    }
}
