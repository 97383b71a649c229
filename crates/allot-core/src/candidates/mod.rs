//! Allocation candidates: the answers to "where does this request fit?"
//! (`GET /allocation_candidates`), searched in memory.
//!
//! A request is a list of *groups*. The unsuffixed group may take each of its resource
//! classes from a different provider of one tree, or from a sharing provider tied to
//! the tree through an aggregate; a suffixed group takes all its resources from one
//! provider. A *candidate* gives every group its providers, all anchored on the same
//! root, such that every provider has room for what all groups together put on it,
//! with the request-wide rules (`group_policy=isolate`, `same_subtree`,
//! `root_required`) satisfied.
//!
//! Which trees a sharing provider serves, in Placement's terms
//! (`research_context.anchors_for_sharing_providers`, `_alloc_candidates_single_provider`
//! and `_alloc_candidates_multiple_providers` in Placement 16.0):
//! - a *sharing provider* is any provider with `MISC_SHARES_VIA_AGGREGATE`, wherever it
//!   sits: a root, a child (given a parent at creation or re-parented, 1.37), or a root
//!   with children of its own;
//! - its *anchors* are the roots of the trees of every provider that is a member of one
//!   of its aggregates: a tree is tied to it through any of its providers (a NUMA or NIC
//!   child's aggregate ties the whole tree, root included), and the sharing provider is
//!   a member of its own aggregates, so its own tree's root is always an anchor;
//! - it may serve, in a candidate anchored on any of its anchors, any class of the
//!   unsuffixed group (each class from one provider) or a whole suffixed group, as a
//!   provider of that tree would; only the sharing provider itself is shared: its parent
//!   and children are ordinary providers of their tree, serving only candidates anchored
//!   on that tree's root;
//! - `in_tree` on the unsuffixed group keeps out sharing providers of other trees, and
//!   its `member_of` admits a sharing provider of another tree only if the sharing
//!   provider itself is in the aggregates (Placement narrows the sharing providers to
//!   the members before it looks for their anchors);
//! - a candidate that uses nothing but sharing providers can come from several anchors
//!   and is answered once.
//!
//! Placement 16.0 departs from this rule in two places that we do not copy (docs/api.md,
//! "Differences"): it keeps an unsuffixed-group answer made only of sharing providers on
//! one of its anchors only, chosen by Python's set order, and it fails (500) when a
//! sharing provider that is not a root serves a tree other than its own in the unsuffixed
//! group. The differential test can mend both in the reference Placement
//! (`--placement-patch anchors,summaries`) to check that nothing else differs.
//!
//! How the search runs:
//! 1. names are checked in Placement's order (an unknown class or trait is an error,
//!    unless an earlier step already made the answer empty; [`validate`]);
//! 2. anchors (roots) are visited one by one; for each, [`filter`] lists the providers
//!    each *slot* of the request may use there (capacity is checked first: a provider
//!    without room never enters the search);
//! 3. [`search`] walks assignments of providers to slots, treating interchangeable
//!    providers as one class, and expands each valid class-level assignment into
//!    concrete candidates lazily;
//! 4. generation stops as soon as `limit` (or the configured bound) is reached: the
//!    cost depends on what is returned, not on the size of the cloud or the number of
//!    combinations that exist.
//!
//! The order is deterministic (anchors in creation order, then the search's order),
//! unless a random seed is given: then anchors and providers are visited in a random
//! order, candidates are gathered round-robin across anchors up to the bound, and
//! `limit` of them are sampled, as Placement's `randomize_allocation_candidates` does.

mod explain;
mod filter;
mod headroom;
mod order;
mod search;
mod summary;
mod validate;
mod walk;
mod weigh;

use std::collections::{BTreeSet, HashSet};

use uuid::Uuid;

use crate::error::Result;
use crate::model::{Provider, ProviderId, Timestamp};
use crate::names::{ProviderRef, RequestedName, ResourceClass, TraitName};
use crate::state::State;

pub use explain::{Explanation, GroupExplanation, STAGES};
pub use headroom::Headroom;
pub use summary::{ProviderSummary, SummaryResource};
pub use weigh::{load, Load, Sort, Weigh};

pub(crate) use order::Orders;

use filter::Prepared;
use search::{AnchorSearch, Budget, Tables};

/// The default bound on the candidates generated for one request
/// (`--max-allocation-candidates`).
pub const DEFAULT_MAX_CANDIDATES: usize = 100_000;

/// The default number of search steps one request may take before it gives up and
/// answers with what it found (a guard against pathological requests; a step is one
/// provider tried for one slot).
pub const DEFAULT_STEP_BUDGET: u64 = 20_000_000;

/// One request group, parsed and checked for form (names are checked against the
/// state by the search).
///
/// Class and trait names are [`RequestedName`]s: Placement answers text that is no
/// name as it answers a name it does not have, at that name's step of its order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestGroup {
    /// `""` for the unsuffixed group, else the suffix (`"1"`, `"_NIC"`).
    pub suffix: String,
    /// Resource classes and amounts, in request order (may be empty from 1.36).
    pub resources: Vec<(RequestedName<ResourceClass>, u64)>,
    /// Required traits: at least one of every inner list.
    pub required: Vec<Vec<RequestedName<TraitName>>>,
    /// Forbidden traits.
    pub forbidden: Vec<RequestedName<TraitName>>,
    /// Aggregates: at least one of every inner list.
    pub member_of: Vec<Vec<Uuid>>,
    /// Forbidden aggregates.
    pub forbidden_aggregates: Vec<Uuid>,
    /// A provider whose tree the group must use.
    pub in_tree: Option<ProviderRef>,
}

/// A whole request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CandidateQuery {
    /// The groups, in the order their first parameter appeared.
    pub groups: Vec<RequestGroup>,
    /// `group_policy=isolate`: suffixed groups use distinct providers.
    pub isolate: bool,
    /// At most this many candidates.
    pub limit: Option<usize>,
    /// Traits the anchor root must have (`root_required`).
    pub root_required: Vec<RequestedName<TraitName>>,
    /// Traits the anchor root must not have (`root_required=!T`).
    pub root_forbidden: Vec<RequestedName<TraitName>>,
    /// `same_subtree` sets of suffixes.
    pub same_subtrees: Vec<Vec<String>>,
    /// From 1.29: candidates may combine several providers of one tree. Before, a
    /// candidate uses at most one provider of each tree.
    pub nested_aware: bool,
    /// The moment the question is asked: pending claims live then count as used,
    /// expired ones do not (see `crate::ops::claims`).
    pub now: Timestamp,
    /// How the candidates are ordered (allot's extension; by default the search's
    /// order, Placement's).
    pub weigh: Weigh,
}

/// How a search runs (server settings, not part of the request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchOptions {
    /// Generate at most this many candidates (the limit applies within it).
    pub max_candidates: usize,
    /// Random sampling instead of the deterministic order, with this seed.
    pub random_seed: Option<u64>,
    /// Search steps allowed (see [`DEFAULT_STEP_BUDGET`]).
    pub step_budget: u64,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            max_candidates: DEFAULT_MAX_CANDIDATES,
            random_seed: None,
            step_budget: DEFAULT_STEP_BUDGET,
        }
    }
}

/// One candidate: what to allocate where, and which providers serve which group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AllocationRequest {
    /// `(provider, class index into Candidates::classes, amount)`, sorted, one entry
    /// per provider and class (amounts of several groups added up).
    pub allocations: Vec<(ProviderId, usize, u64)>,
    /// For each group of the query, in order: the providers serving it, sorted.
    pub mappings: Vec<Vec<ProviderId>>,
}

/// The answer to a request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Candidates {
    /// The candidates.
    pub requests: Vec<AllocationRequest>,
    /// The requested classes, indexed as in the allocations.
    pub classes: Vec<ResourceClass>,
    /// Providers to summarise, in creation order: every provider of the trees the
    /// candidates allocate from (from 1.29), or only the providers they allocate from
    /// (before).
    pub summaries: Vec<ProviderId>,
    /// Whether generation stopped at the configured bound or step budget rather than
    /// at the request's limit or the end of the answers.
    pub truncated: bool,
    /// When [`Candidates::truncated`]: how many roots the search visited before it
    /// stopped, of how many it could have visited.
    pub explored: Option<Explored>,
}

/// How far a search cut short got (`--max-allocation-candidates` or the step budget),
/// so that a client can tell that roots were left unexplored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Explored {
    /// Roots (anchors) visited, in whole or in part.
    pub roots_explored: usize,
    /// Roots the request could have visited: every root, or the one `in_tree` pins.
    pub roots: usize,
}

impl Candidates {
    /// The name of a class index of [`AllocationRequest::allocations`].
    pub fn class_name(&self, index: usize) -> &str {
        self.classes[index].as_str()
    }
}

/// A small deterministic pseudo-random generator (SplitMix64): the core reads no
/// entropy, callers pass the seed in.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub(crate) fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

impl State {
    /// The allocation candidates for a request.
    ///
    /// Refuses (as [`crate::Error::Invalid`]) an unknown resource class (`Invalid
    /// resource class in resources parameter: No such resource class X.`) or trait
    /// (`No such trait(s): X.`), unless an earlier step of Placement's order already
    /// found that nothing matches, in which case the answer is empty.
    pub fn allocation_candidates(
        &self,
        query: &CandidateQuery,
        options: &SearchOptions,
    ) -> Result<Candidates> {
        self.candidates_admitted(query, options, &Admit::all())
    }

    /// The candidates `admit` admits, as [`State::allocation_candidates`] answers them
    /// (a limit counts admitted candidates only): how pick-and-claim keeps affinity
    /// rules (`crate::ops::pick`).
    pub fn candidates_admitted(
        &self,
        query: &CandidateQuery,
        options: &SearchOptions,
        admit: &Admit<'_>,
    ) -> Result<Candidates> {
        self.candidates_with(query, options, admit, false)
    }

    /// [`State::candidates_admitted`] for a pick, in the writer: a `spread` walk
    /// follows the order kept for the query's shape (`order`'s module doc).
    pub(crate) fn candidates_for_pick(
        &self,
        query: &CandidateQuery,
        options: &SearchOptions,
        admit: &Admit<'_>,
    ) -> Result<Candidates> {
        self.candidates_with(query, options, admit, true)
    }

    fn candidates_with(
        &self,
        query: &CandidateQuery,
        options: &SearchOptions,
        admit: &Admit<'_>,
        kept_order: bool,
    ) -> Result<Candidates> {
        if let Some(refusal) = validate::first_refusal(self, query) {
            return match refusal {
                validate::Refusal::Empty => Ok(Candidates::default()),
                validate::Refusal::Error(e) => Err(e),
            };
        }
        if let Some(unknown) = query
            .weigh
            .prefer
            .iter()
            .find(|t| !t.name().is_some_and(|t| self.trait_exists(t)))
        {
            return Err(crate::Error::invalid(format!(
                "No such trait(s): {unknown}."
            )));
        }
        let prep = Prepared::new(self, query);
        let mut out = Candidates {
            classes: prep.classes.iter().map(|c| (*c).clone()).collect(),
            ..Default::default()
        };
        if prep.hopeless() {
            return Ok(out);
        }
        let bound = options.max_candidates.max(1);
        let weighed = query.weigh.is_set();
        // Weighing orders the whole set: the limit applies after it.
        let cap = match query.limit {
            Some(limit) if !weighed => limit.min(bound),
            _ => bound,
        };
        let mut budget = Budget {
            steps_left: options.step_budget,
            exhausted: false,
            anchors: 0,
        };
        // A weighed answer with a limit: the first of the order, walked to.
        let walked = walk::applies(&prep, &query.weigh, query.limit).and_then(|sort| {
            let limit = query.limit.unwrap_or(usize::MAX);
            let walk = walk::Walk::new(&prep, admit, sort, limit, bound);
            if kept_order && sort == Sort::Spread && prep.pinned().is_none() {
                walk.run_kept(&mut budget)
            } else {
                walk.run(&mut budget)
            }
        });
        if let Some(requests) = walked {
            out.truncated = budget.exhausted;
            out.explored = self.explored(&prep, out.truncated, &budget);
            out.summaries = self.summarised(&requests, query.nested_aware);
            out.requests = requests;
            return Ok(out);
        }
        let mut gen = Generator {
            prep: &prep,
            seen: HashSet::new(),
            admit,
        };
        let (mut requests, bound_hit) = match options.random_seed {
            Some(seed) if !weighed => gen.sampled(bound, query.limit, &mut budget, Rng::new(seed)),
            _ => gen.in_order(cap, &mut budget),
        };
        if weighed {
            weigh::order(self, &out.classes, &mut requests, &query.weigh, query.now);
            requests.truncate(query.limit.unwrap_or(usize::MAX));
        }
        out.truncated = budget.exhausted || (bound_hit && query.limit.is_none_or(|l| l > bound));
        out.explored = self.explored(&prep, out.truncated, &budget);
        out.summaries = self.summarised(&requests, query.nested_aware);
        out.requests = requests;
        Ok(out)
    }

    /// How far a search cut short got: the anchors visited, of those there are.
    fn explored(
        &self,
        prep: &Prepared<'_, '_>,
        truncated: bool,
        budget: &Budget,
    ) -> Option<Explored> {
        // Counted only when cut short: the anchors are every root, a walk over the
        // providers that a complete answer need not pay for.
        truncated.then(|| Explored {
            roots_explored: budget.anchors,
            roots: prep.anchors().count(),
        })
    }

    /// Whether the request has at least one candidate (for the order of errors:
    /// Placement stops at the first group with no candidate of its own).
    pub(crate) fn any_candidate(&self, query: &CandidateQuery) -> bool {
        let prep = Prepared::new(self, query);
        if prep.hopeless() {
            return false;
        }
        let mut budget = Budget {
            steps_left: DEFAULT_STEP_BUDGET,
            exhausted: false,
            anchors: 0,
        };
        let mut gen = Generator {
            prep: &prep,
            seen: HashSet::new(),
            admit: &Admit::all(),
        };
        !gen.in_order(1, &mut budget).0.is_empty()
    }

    /// The providers whose summaries accompany `requests`.
    fn summarised(&self, requests: &[AllocationRequest], nested_aware: bool) -> Vec<ProviderId> {
        let used: BTreeSet<ProviderId> = requests
            .iter()
            .flat_map(|r| r.allocations.iter().map(|a| a.0))
            .collect();
        if !nested_aware {
            return used.into_iter().collect();
        }
        let roots: BTreeSet<ProviderId> = used
            .iter()
            .filter_map(|id| self.provider(*id))
            .map(|p| p.row.root)
            .collect();
        let mut all: Vec<ProviderId> = roots.iter().flat_map(|r| self.subtree(*r)).collect();
        all.sort_unstable();
        all
    }
}

/// Pulls candidates from anchor searches.
struct Generator<'p, 's, 'q, 'a> {
    prep: &'p Prepared<'s, 'q>,
    /// Candidates made only of sharing providers, which several anchors can produce
    /// identically: each is answered once.
    seen: HashSet<AllocationRequest>,
    /// Which anchors are searched and which candidates may be answered at all.
    admit: &'a Admit<'a>,
}

/// A filter on the search (pick-and-claim's affinity rules): which anchors (roots) are
/// searched at all, and which of the candidates found may be answered.
pub struct Admit<'a> {
    /// Whether an anchor is searched.
    pub anchor: &'a dyn Fn(ProviderId) -> bool,
    /// Whether a candidate found is answered.
    pub candidate: &'a dyn Fn(&AllocationRequest) -> bool,
}

impl Admit<'static> {
    /// Every anchor and candidate: the plain search.
    pub fn all() -> Self {
        Admit {
            anchor: &|_| true,
            candidate: &|_| true,
        }
    }
}

impl<'p, 's, 'q> Generator<'p, 's, 'q, '_> {
    /// Whether a candidate is admitted and new (only candidates of sharing providers
    /// alone can repeat across anchors).
    fn fresh(&mut self, candidate: &AllocationRequest) -> bool {
        if !(self.admit.candidate)(candidate) {
            return false;
        }
        let only_sharing = candidate
            .mappings
            .iter()
            .flatten()
            .chain(candidate.allocations.iter().map(|a| &a.0))
            .all(|id| self.prep.is_sharing(*id));
        !only_sharing || self.seen.insert(candidate.clone())
    }

    fn search_at(
        &self,
        anchor: &'s Provider,
        rng: Option<&mut Rng>,
        spare: &mut Tables,
    ) -> Option<AnchorSearch<'p, 's, 'q>> {
        if !(self.admit.anchor)(anchor.id()) {
            return None;
        }
        let slots = self.prep.slots_at(anchor)?;
        Some(AnchorSearch::new(self.prep, slots, rng, spare))
    }

    /// Anchors in creation order, each searched to the end before the next, until
    /// `cap` candidates. Also says whether it stopped at `cap`.
    fn in_order(&mut self, cap: usize, budget: &mut Budget) -> (Vec<AllocationRequest>, bool) {
        let mut out = Vec::new();
        // One set of search tables for every anchor.
        let mut spare = Tables::default();
        for anchor in self.prep.anchors() {
            budget.anchors += 1;
            let Some(mut search) = self.search_at(anchor, None, &mut spare) else {
                continue;
            };
            while let Some(candidate) = search.next(budget) {
                if self.fresh(&candidate) {
                    out.push(candidate);
                    if out.len() >= cap {
                        return (out, true);
                    }
                }
            }
            search.recycle(&mut spare);
            if budget.exhausted {
                break;
            }
        }
        (out, false)
    }

    /// Random sampling: anchors in random order, providers in random order, up to
    /// `bound` candidates gathered a few per anchor at a time (so that a wide tree
    /// with millions of candidates does not fill the pool alone), then `limit` of
    /// them drawn at random.
    fn sampled(
        &mut self,
        bound: usize,
        limit: Option<usize>,
        budget: &mut Budget,
        mut rng: Rng,
    ) -> (Vec<AllocationRequest>, bool) {
        let mut anchors: Vec<&'s Provider> = self.prep.anchors().collect();
        rng.shuffle(&mut anchors);
        let quota = (bound / anchors.len().max(1)).max(16);
        let mut pool: Vec<AllocationRequest> = Vec::new();
        let mut pending: Vec<AnchorSearch<'p, 's, 'q>> = Vec::new();
        let take = |search: &mut AnchorSearch<'p, 's, 'q>,
                    pool: &mut Vec<AllocationRequest>,
                    this: &mut Self,
                    budget: &mut Budget|
         -> bool {
            // Returns whether the search may have more.
            for _ in 0..quota {
                if pool.len() >= bound || budget.exhausted {
                    return false;
                }
                match search.next(budget) {
                    Some(c) => {
                        if this.fresh(&c) {
                            pool.push(c);
                        }
                    }
                    None => return false,
                }
            }
            true
        };
        for anchor in anchors {
            if pool.len() >= bound || budget.exhausted {
                break;
            }
            budget.anchors += 1;
            // These searches are kept pending: each has tables of its own.
            let Some(mut search) = self.search_at(anchor, Some(&mut rng), &mut Tables::default())
            else {
                continue;
            };
            if take(&mut search, &mut pool, self, budget) {
                pending.push(search);
            }
        }
        while !pending.is_empty() && pool.len() < bound && !budget.exhausted {
            pending.retain_mut(|search| take(search, &mut pool, self, budget));
        }
        let bound_hit = pool.len() >= bound;
        let want = limit.unwrap_or(pool.len()).min(pool.len());
        // A partial Fisher-Yates shuffle: the first `want` are a uniform sample, in a
        // random order.
        for i in 0..want {
            let j = i + rng.below(pool.len() - i);
            pool.swap(i, j);
        }
        pool.truncate(want);
        (pool, bound_hit)
    }
}

#[cfg(test)]
mod tests;
