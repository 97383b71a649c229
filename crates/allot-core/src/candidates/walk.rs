//! The weighed walk: the first candidates of a `pack` or `spread` order without
//! generating and ordering every candidate of the cloud.
//!
//! A weighed answer with a `limit` (and every pick, which asks for one) wants the
//! first few candidates of an order over all of them. Generating them all and sorting
//! costs the whole cloud for every request, in the writer for a pick. The walk instead
//! gives each anchor a *bound*: for `spread`, no candidate anchored there has a lower
//! [`Load`]; for `pack`, none a higher one. It visits the anchors best bound first
//! (equal bounds in creation order), searches each whole, keeps the best `limit`
//! candidates found, and stops at the first anchor whose bound cannot beat the last
//! of them.
//!
//! The answer is the full order's, exactly. A candidate's place in the full order is
//! its key (its load, ranked by the sort), then its anchor's place in creation order,
//! then its place in that anchor's search. An anchor's candidates all have keys at
//! least `(bound, anchor, 0)`, and anchors are visited in that key's order, so when
//! the last kept candidate's key is below the next anchor's, no candidate unvisited
//! can come before it.
//!
//! The bound of an anchor is the mean, over the requested classes, of the least (for
//! `pack`, the most) `used / capacity` among the providers that could give the class
//! there: of its tree or a sharing provider tied to it, with room for the amount, and
//! not kept out by a rule of the class's group that one provider decides alone. It is
//! a true bound when every candidate has one term per class, which holds when every
//! class is asked for by exactly one group; a query that asks for a class twice
//! (`resources=VCPU:1&resources1=VCPU:1`) is ordered the full way.
//!
//! Also the full way: `prefer` (the trait count ranks before the load), `random`, an
//! answer without a limit (it is every candidate), and a query that a candidate of
//! sharing providers alone could answer (such a candidate can come from several
//! anchors, and its place is that of the first in creation order, which a walk out of
//! creation order does not know). A walk that would generate more candidates than the
//! configured bound gives up, and the full way answers as it always has.
//!
//! What the walk costs: a bound per anchor (a few inventory reads), a heap, and the
//! searches of the anchors visited; not a search per anchor, nor a sort of every
//! candidate.

use std::cell::{Cell, RefCell};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::model::{Provider, ProviderId, Timestamp, NEVER};
use crate::names::ResourceClass;

use super::filter::{has_trait, in_any, InTree, Prepared};
use super::search::{AnchorSearch, Budget, Tables};
use super::weigh::{load, Load};
use super::{Admit, AllocationRequest, Sort, Weigh};

/// Whether the walk answers `weigh` for this query, and under which sort.
pub(super) fn applies(
    prep: &Prepared<'_, '_>,
    weigh: &Weigh,
    limit: Option<usize>,
) -> Option<Sort> {
    let sort = match weigh.sort {
        Some(sort @ (Sort::Pack | Sort::Spread)) if weigh.prefer.is_empty() => sort,
        _ => return None,
    };
    if limit? == 0 {
        return None;
    }
    // Every class asked for exactly once, by one group, in a positive amount.
    let mut asked = vec![0usize; prep.classes.len()];
    for group in &prep.groups {
        for &(k, amount) in &group.demands {
            if amount == 0 {
                return None;
            }
            asked[k] += 1;
        }
    }
    if asked.iter().any(|&n| n != 1) {
        return None;
    }
    // Some class that no sharing provider has: every candidate then uses a provider
    // of its anchor's tree, and comes from that anchor alone.
    (0..prep.classes.len())
        .any(|k| !prep.shared_class(k))
        .then_some(sort)
}

/// An anchor waiting in the walk's heap, ordered so that the best bound (then the
/// first created) comes out first.
struct Waiting {
    bound: Load,
    anchor: ProviderId,
    sort: Sort,
}

impl Waiting {
    fn key(&self, other: &Self) -> Ordering {
        self.sort
            .rank(&self.bound, &other.bound)
            .then(self.anchor.cmp(&other.anchor))
    }
}

impl Ord for Waiting {
    fn cmp(&self, other: &Self) -> Ordering {
        // `BinaryHeap` pops the greatest: the best key is made the greatest.
        other.key(self)
    }
}

impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Waiting {}

/// A candidate kept, with its key in the full order.
struct Kept {
    load: Load,
    anchor: ProviderId,
    index: usize,
    request: AllocationRequest,
}

/// The walk gave up: it generated more candidates than the configured bound.
pub(super) struct GaveUp;

/// The walk over one prepared query.
pub(super) struct Walk<'p, 's, 'q, 'a> {
    pub prep: &'p Prepared<'s, 'q>,
    pub admit: &'a Admit<'a>,
    pub sort: Sort,
    pub limit: usize,
    /// Candidates the walk may generate before it gives up.
    pub max_candidates: usize,
    /// The first instant after the query's `now` at which a pending claim counted
    /// in an anchor's own terms since this was last set stops counting, or one on
    /// pools that left the anchor without a bound (see `super::order`).
    pub next_expiry: Cell<Timestamp>,
    /// The same for the pools' terms.
    pub pool_expiry: Cell<Timestamp>,
    /// What [`Walk::parts_at`] works in, kept from anchor to anchor: a walk computes
    /// thousands of bounds.
    buffers: RefCell<BoundBuffers<'s>>,
    /// The pools' terms met so far in this walk, by pool, requested class and
    /// amount: a pool is tied to thousands of anchors, and the view does not change
    /// during a walk.
    pool_terms: RefCell<Vec<(PoolTerm, Option<u128>)>>,
    /// [`Walk::bound_at`]'s list of the shared class's pools, kept between anchors.
    shared_pools: RefCell<Vec<ProviderId>>,
}

/// A pool's term is kept by pool, requested class and amount.
type PoolTerm = (ProviderId, usize, u64);

/// An anchor's bound in two parts, so that a kept order can leave the pools' part
/// out of its keys (`super::order`): the bound's sum is `rest` plus the better of
/// the shared class's term on the anchor's own providers and on its pools.
#[derive(Debug, Clone, Copy)]
pub(super) struct Parts {
    /// The terms of the other classes, added up.
    pub rest: u128,
    /// The one requested class that pools tied to the anchor offer, if only one
    /// does: its index, its amount, and its best term among the anchor's own
    /// providers (None: none has room).
    pub shared: Option<(usize, u64, Option<u128>)>,
    /// Whether pools' terms are in `rest` (they offer several requested classes).
    pub pooled_rest: bool,
}

/// See [`Walk::buffers`].
#[derive(Default)]
struct BoundBuffers<'s> {
    /// The anchor's providers.
    providers: Vec<&'s Provider>,
    /// The pools tied to it, as `Prepared::anchor_providers_into` lists them.
    ids: Vec<ProviderId>,
    /// Per provider: whether it may serve the group at hand.
    usable: Vec<bool>,
    /// The pools that offer the class at hand.
    pools: Vec<ProviderId>,
}

/// What a walk carries from anchor to anchor.
pub(super) struct Progress {
    kept: Vec<Kept>,
    generated: usize,
    budget: Budget,
    spare: Tables,
    classes: Vec<ResourceClass>,
}

impl<'p, 's, 'q, 'a> Walk<'p, 's, 'q, 'a> {
    /// A walk of `sort` for the first `limit` candidates.
    pub fn new(
        prep: &'p Prepared<'s, 'q>,
        admit: &'a Admit<'a>,
        sort: Sort,
        limit: usize,
        max_candidates: usize,
    ) -> Self {
        Walk {
            prep,
            admit,
            sort,
            limit,
            max_candidates,
            next_expiry: Cell::new(NEVER),
            pool_expiry: Cell::new(NEVER),
            buffers: RefCell::default(),
            pool_terms: RefCell::default(),
            shared_pools: RefCell::default(),
        }
    }

    /// What a walk starts with, its steps taken from `budget`.
    pub fn start(&self, budget: &Budget) -> Progress {
        Progress {
            kept: Vec::with_capacity(self.limit.min(1024) + 1),
            generated: 0,
            budget: Budget {
                steps_left: budget.steps_left,
                exhausted: false,
                anchors: budget.anchors,
            },
            spare: Tables::default(),
            classes: self.prep.classes.iter().map(|c| (*c).clone()).collect(),
        }
    }

    /// Whether the search's step budget ran out.
    pub fn exhausted(&self, progress: &Progress) -> bool {
        progress.budget.exhausted
    }

    /// The candidates kept, in order, and the steps left to `budget`.
    pub fn finish(&self, progress: Progress, budget: &mut Budget) -> Vec<AllocationRequest> {
        *budget = progress.budget;
        progress.kept.into_iter().map(|k| k.request).collect()
    }

    /// The first `limit` candidates of the order, in order, bounds computed for every
    /// anchor; None when the walk gave up, with `budget` as it was.
    pub fn run(&self, budget: &mut Budget) -> Option<Vec<AllocationRequest>> {
        let mut heap: BinaryHeap<Waiting> = self
            .prep
            .anchors()
            .filter(|anchor| (self.admit.anchor)(anchor.id()))
            .filter_map(|anchor| {
                Some(Waiting {
                    bound: self.bound_at(anchor)?,
                    anchor: anchor.id(),
                    sort: self.sort,
                })
            })
            .collect();
        let mut progress = self.start(budget);
        while let Some(next) = heap.pop() {
            if self.done(&progress, &next.bound, next.anchor) {
                break;
            }
            self.visit(next.anchor, &mut progress).ok()?;
            if progress.budget.exhausted {
                break;
            }
        }
        Some(self.finish(progress, budget))
    }

    /// Whether no candidate of an anchor whose bound is `bound` (or of any after it)
    /// can be among the first `limit`.
    pub fn done(&self, progress: &Progress, bound: &Load, anchor: ProviderId) -> bool {
        progress.kept.len() >= self.limit
            && progress.kept.last().is_some_and(|last| {
                self.sort
                    .rank(&last.load, bound)
                    .then(last.anchor.cmp(&anchor))
                    == Ordering::Less
            })
    }

    /// Searches one anchor (if the pick's rule admits it) and keeps what is among the
    /// first `limit` so far.
    pub fn visit(&self, anchor: ProviderId, progress: &mut Progress) -> Result<(), GaveUp> {
        let prep = self.prep;
        progress.budget.anchors += 1;
        if !(self.admit.anchor)(anchor) {
            return Ok(());
        }
        let Some(slots) = prep.state.provider(anchor).and_then(|p| prep.slots_at(p)) else {
            return Ok(());
        };
        let mut search = AnchorSearch::new(prep, slots, None, &mut progress.spare);
        let mut index = 0;
        while let Some(request) = search.next(&mut progress.budget) {
            progress.generated += 1;
            if progress.generated > self.max_candidates {
                return Err(GaveUp);
            }
            index += 1;
            if !(self.admit.candidate)(&request) {
                continue;
            }
            let found = Kept {
                load: load(prep.state, &progress.classes, &request, prep.query.now),
                anchor,
                index,
                request,
            };
            self.keep(&mut progress.kept, found);
        }
        search.recycle(&mut progress.spare);
        Ok(())
    }

    /// Adds `found` to the best candidates kept, in order, if it is among the first
    /// `limit`.
    fn keep(&self, kept: &mut Vec<Kept>, found: Kept) {
        let key = |k: &Kept| (k.anchor, k.index);
        let at = kept.partition_point(|k| {
            self.sort
                .rank(&k.load, &found.load)
                .then(key(k).cmp(&key(&found)))
                == Ordering::Less
        });
        if at < self.limit {
            kept.insert(at, found);
            kept.truncate(self.limit);
        }
    }

    /// The anchor's bound (see the module doc), or None when no candidate can be
    /// anchored there (a class that no provider of it can give, or a rule the anchor
    /// alone fails). The pick's rule on anchors is not read: a kept order serves
    /// every pick of its shape.
    pub fn bound_at(&self, anchor: &'s Provider) -> Option<Load> {
        let mut pools = std::mem::take(&mut *self.shared_pools.borrow_mut());
        let sum = self
            .parts_at(anchor, &mut pools)
            .and_then(|parts| self.whole(&parts, &pools));
        *self.shared_pools.borrow_mut() = pools;
        Load::of(sum?, self.terms())
    }

    /// How many terms every bound has: one per requested class (the walk applies
    /// only when each class is asked for once).
    pub fn terms(&self) -> u32 {
        u32::try_from(self.prep.classes.len()).unwrap_or(u32::MAX)
    }

    /// The sum of an anchor's bound from its parts: the rest, and the better of the
    /// shared class's term on the anchor's own providers and on `pools`.
    pub fn whole(&self, parts: &Parts, pools: &[ProviderId]) -> Option<u128> {
        match parts.shared {
            None => Some(parts.rest),
            Some((k, amount, local)) => {
                let term = self.better(local, self.pools_term(k, amount, pools))?;
                Some(parts.rest + term)
            }
        }
    }

    /// The better of two terms (for `spread` the lower), either of which may be
    /// missing.
    fn better(&self, a: Option<u128>, b: Option<u128>) -> Option<u128> {
        match (a, b) {
            (Some(a), Some(b)) => Some(match self.sort.rank_terms(a, b) {
                Ordering::Greater => b,
                _ => a,
            }),
            (a, None) => a,
            (None, b) => b,
        }
    }

    /// The best term of requested class `k` among `pools` (None: none has room for
    /// `amount`).
    pub fn pools_term(&self, k: usize, amount: u64, pools: &[ProviderId]) -> Option<u128> {
        let state = self.prep.state;
        pools
            .iter()
            .filter_map(|id| state.provider(*id))
            .fold(None, |best, p| {
                self.better(best, self.pool_term(p, k, amount))
            })
    }

    /// [`Walk::term`] of a pool, kept for the walk: a pool is tied to thousands of
    /// anchors, and the view does not change during a walk.
    fn pool_term(&self, p: &Provider, k: usize, amount: u64) -> Option<u128> {
        let key = (p.id(), k, amount);
        let mut kept = self.pool_terms.borrow_mut();
        if let Some(&(_, term)) = kept.iter().find(|(at, _)| *at == key) {
            return term;
        }
        let term = self.term(p, k, amount, &self.pool_expiry);
        // Searched one by one: kept for a few pools only.
        if kept.len() < 64 {
            kept.push((key, term));
        }
        term
    }

    /// The anchor's bound in parts (see [`Parts`]), the pools of the shared class
    /// in `shared_pools`; None as for [`Walk::bound_at`].
    pub fn parts_at(
        &self,
        anchor: &'s Provider,
        shared_pools: &mut Vec<ProviderId>,
    ) -> Option<Parts> {
        let prep = self.prep;
        shared_pools.clear();
        if !prep.root_allowed(anchor) {
            return None;
        }
        let mut buffers = self.buffers.borrow_mut();
        let BoundBuffers {
            providers,
            ids,
            usable,
            pools,
        } = &mut *buffers;
        let in_tree = prep.anchor_providers_into(anchor, providers, ids);
        let mut parts = Parts {
            rest: 0,
            shared: None,
            pooled_rest: false,
        };
        for group in &prep.groups {
            let req = group.request;
            if !group.granular {
                // The unsuffixed group's required traits are met by its providers
                // together: at least by all the anchor's.
                let covered = req.required.iter().all(|any| {
                    any.iter()
                        .any(|t| providers.iter().any(|p| has_trait(p, t)))
                });
                if !covered || in_any(anchor, &req.forbidden_aggregates) {
                    return None;
                }
                if matches!(group.in_tree, InTree::Root(root) if root != anchor.id())
                    || group.in_tree == InTree::Missing
                {
                    return None;
                }
            }
            // Which providers may serve the group, decided once for all its classes.
            usable.clear();
            usable.extend(providers.iter().enumerate().map(|(i, p)| {
                if group.granular {
                    prep.serves_whole_group(group, p)
                } else {
                    (i < in_tree || group.in_tree == InTree::Anywhere)
                        && !req.forbidden.iter().any(|t| has_trait(p, t))
                        && !in_any(p, &req.forbidden_aggregates)
                }
            }));
            for &(k, amount) in &group.demands {
                let class = prep.classes[k].as_str();
                let mut local = None;
                pools.clear();
                for (i, p) in providers.iter().enumerate().filter(|(i, _)| usable[*i]) {
                    if i < in_tree {
                        let term = self.term(p, k, amount, &self.next_expiry);
                        local = self.better(local, term);
                    } else if p.inventories.contains_key(class) {
                        pools.push(p.id());
                    }
                }
                if pools.is_empty() {
                    parts.rest += local?;
                } else if parts.shared.is_none() && !parts.pooled_rest {
                    parts.shared = Some((k, amount, local));
                    shared_pools.extend_from_slice(pools);
                } else {
                    // A second class that pools offer: both are in the rest.
                    parts.rest += self.pooled_term(local, k, amount, pools)?;
                    parts.pooled_rest = true;
                }
            }
        }
        if parts.pooled_rest {
            if let Some((k, amount, local)) = parts.shared.take() {
                parts.rest += self.pooled_term(local, k, amount, shared_pools)?;
                shared_pools.clear();
            }
        }
        Some(parts)
    }

    /// The better of `local` and the best term of class `k` among `pools`, for a
    /// bound whose rest holds the pools' terms. When neither has room the anchor has
    /// no bound until a claim on the pools expires, which no change records: that
    /// expiry is noted as the anchor's own, so that a kept order looks at the anchor
    /// again then (`super::order`), as it does for its own providers' claims.
    fn pooled_term(
        &self,
        local: Option<u128>,
        k: usize,
        amount: u64,
        pools: &[ProviderId],
    ) -> Option<u128> {
        let term = self.better(local, self.pools_term(k, amount, pools));
        if term.is_none() {
            // Every pool's term read in this walk folded its expiry in.
            self.next_expiry
                .set(self.next_expiry.get().min(self.pool_expiry.get()));
        }
        term
    }

    /// Provider `p`'s term for requested class `k`, if it has room for `amount`; the
    /// earliest expiry of a pending claim it counts is folded into `expiry`.
    fn term(&self, p: &Provider, k: usize, amount: u64, expiry: &Cell<Timestamp>) -> Option<u128> {
        let class = self.prep.classes[k].as_str();
        let inv = p.inventories.get(class)?;
        let capacity = inv.capacity();
        let used = self.prep.used(p, k);
        if !p.pending.is_empty() {
            expiry.set(
                expiry
                    .get()
                    .min(p.pending.next_expiry(class, self.prep.query.now)),
            );
        }
        let fits =
            i128::from(amount) <= capacity - i128::from(used) && inv.units().admits(amount).is_ok();
        fits.then(|| Load::term(used, capacity))
    }
}
