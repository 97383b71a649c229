//! Weighing candidates (allot's extension, issue 24): `sort=pack|spread|random` and
//! `prefer=TRAIT,...` on `GET /allocation_candidates` and in pick-and-claim.
//!
//! Weighing only reorders: the candidates weighed are the whole set the search
//! generates (up to the configured bound), and a request's `limit` is applied after
//! the order, so that the first candidates are the best of all, not of the first few.
//! The order is a stable sort of the search's own (deterministic) order by two keys:
//!
//! 1. **prefer**: how many of the preferred traits the candidate has, a trait counting
//!    when at least one of the providers it allocates from or maps a group to has it;
//!    more first;
//! 2. **sort**: the candidate's *load*, the mean over its allocations (one per provider
//!    and class) of `used / capacity` on that provider before this request, where `used`
//!    counts allocations and live pending claims and `capacity` is `(total − reserved) ×
//!    allocation_ratio`, counted exactly (see [`Load`]); `pack` puts the most loaded
//!    first (fill hosts before opening new ones), `spread` the least loaded; `random`
//!    shuffles instead, with a seed the caller draws.
//!
//! Candidates equal on both keys keep the search's order (providers in creation
//! order), so the answer is the same for the same state, except with `random`.
//!
//! This module is the order's definition, applied here to the whole set. A `pack` or
//! `spread` answer with a limit is found without generating the whole set
//! (`super::walk`, and for picks `super::order`), and is the same answer.

use std::cmp::Ordering;

use crate::model::{ProviderId, Timestamp};
use crate::names::{RequestedName, ResourceClass, TraitName};
use crate::state::State;

use super::{AllocationRequest, Rng};

/// How candidates are ordered. The default orders nothing: the search's order, as
/// Placement gives it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Weigh {
    /// The order by load, or a shuffle.
    pub sort: Option<Sort>,
    /// Traits that rank a candidate higher (see the module doc).
    pub prefer: Vec<RequestedName<TraitName>>,
}

/// `sort=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    /// The most loaded first.
    Pack,
    /// The least loaded first.
    Spread,
    /// A shuffle with this seed (drawn by the caller: the core reads no entropy).
    Random(u64),
}

impl Weigh {
    /// Whether anything is asked (else the search's order stands, and `limit` stops
    /// the search early).
    pub fn is_set(&self) -> bool {
        self.sort.is_some() || !self.prefer.is_empty()
    }
}

/// Orders `requests` as `weigh` says (see the module doc); `classes` are the class
/// names the allocations index.
pub(super) fn order(
    state: &State,
    classes: &[ResourceClass],
    requests: &mut Vec<AllocationRequest>,
    weigh: &Weigh,
    now: Timestamp,
) {
    if let Some(Sort::Random(seed)) = weigh.sort {
        Rng::new(seed).shuffle(requests);
    }
    let preferred: Vec<&TraitName> = weigh.prefer.iter().filter_map(|t| t.name()).collect();
    let by_load = match weigh.sort {
        Some(Sort::Pack) => Some(Sort::Pack),
        Some(Sort::Spread) => Some(Sort::Spread),
        Some(Sort::Random(_)) | None => None,
    };
    // Each key computed once per candidate, not once per comparison.
    let mut keyed: Vec<(usize, Load, AllocationRequest)> = requests
        .drain(..)
        .map(|r| {
            let prefer = preferred_count(state, &r, &preferred);
            let load = by_load.map_or(Load::ZERO, |_| load(state, classes, &r, now));
            (prefer, load, r)
        })
        .collect();
    keyed.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| by_load.map_or(Ordering::Equal, |sort| sort.rank(&a.1, &b.1)))
    });
    requests.extend(keyed.into_iter().map(|(_, _, r)| r));
}

impl Sort {
    /// How two loads rank under `pack` or `spread` (`Less`: `a` comes first); a
    /// shuffle ranks nothing.
    pub(super) fn rank(self, a: &Load, b: &Load) -> Ordering {
        match self {
            Sort::Spread => a.cmp(b),
            Sort::Pack => b.cmp(a),
            Sort::Random(_) => Ordering::Equal,
        }
    }

    /// How two terms of a load rank, as [`Sort::rank`] ranks loads.
    pub(super) fn rank_terms(self, a: u128, b: u128) -> Ordering {
        match self {
            Sort::Spread => a.cmp(&b),
            Sort::Pack => b.cmp(&a),
            Sort::Random(_) => Ordering::Equal,
        }
    }
}

/// How many of `preferred` the candidate's providers have between them.
fn preferred_count(state: &State, r: &AllocationRequest, preferred: &[&TraitName]) -> usize {
    if preferred.is_empty() {
        return 0;
    }
    let mut providers: Vec<ProviderId> = r
        .allocations
        .iter()
        .map(|a| a.0)
        .chain(r.mappings.iter().flatten().copied())
        .collect();
    providers.sort_unstable();
    providers.dedup();
    preferred
        .iter()
        .filter(|t| {
            providers
                .iter()
                .filter_map(|id| state.provider(*id))
                .any(|p| p.traits.contains(t.as_str()))
        })
        .count()
}

/// A candidate's load: the mean of its terms, each one allocation's `used /
/// capacity` on its provider before the candidate.
///
/// Each term is counted exactly, in units of 2⁻³² rounded down, and loads are compared
/// by cross-multiplying sums and counts, never in floating point: equal loads are
/// equal whatever the order of the terms, and a mean of per-class least (or most)
/// terms is a true bound on every candidate's mean, which the weighed walk
/// (`super::walk`) relies on to stop early. Two loads that differ by less than 2⁻³²
/// compare equal, and then the search's order decides, as for any tie.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// The terms, added up.
    sum: u128,
    /// How many terms (at least 1; no term counts as one term of 0).
    terms: u32,
}

impl Load {
    /// No load (a candidate without a term, or an unweighed order).
    pub const ZERO: Load = Load { sum: 0, terms: 1 };

    /// One term: `used / capacity` in units of 2⁻³², rounded down; `capacity` is
    /// positive. Capped at 2⁸⁰ (a provider over-committed 2⁴⁸ times over), so that
    /// sums and their cross-products stay within 128 bits.
    pub(super) fn term(used: u64, capacity: i128) -> u128 {
        let capacity = u128::try_from(capacity).unwrap_or(1).max(1);
        ((u128::from(used) << 32) / capacity).min(1 << 80)
    }

    /// The mean of `terms` (None when there are none).
    pub(super) fn mean(terms: impl IntoIterator<Item = u128>) -> Option<Load> {
        let mut load = Load { sum: 0, terms: 0 };
        for term in terms {
            load.sum += term;
            load.terms += 1;
        }
        (load.terms > 0).then_some(load)
    }

    /// The mean of `terms` terms that add up to `sum` (None when there are none).
    pub(super) fn of(sum: u128, terms: u32) -> Option<Load> {
        (terms > 0).then_some(Load { sum, terms })
    }

    /// The load as a fraction (for display: the order compares exactly).
    pub fn as_f64(&self) -> f64 {
        self.sum as f64 / f64::from(self.terms) / 4_294_967_296.0
    }
}

impl Ord for Load {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.sum * u128::from(other.terms)).cmp(&(other.sum * u128::from(self.terms)))
    }
}

impl PartialOrd for Load {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Load {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Load {}

/// The candidate's [`Load`] before it: the mean over its allocations of `used /
/// capacity`.
pub fn load(
    state: &State,
    classes: &[ResourceClass],
    r: &AllocationRequest,
    now: Timestamp,
) -> Load {
    let terms = r.allocations.iter().filter_map(|&(id, k, _)| {
        let provider = state.provider(id)?;
        let class = &classes[k];
        let capacity = provider.inventories.get(class.as_str())?.capacity();
        // A capacity of 0 or less holds nothing this candidate could take; it
        // cannot be in a candidate, but a ratio must not divide by it.
        (capacity > 0).then(|| Load::term(provider.used(class.as_str(), now), capacity))
    });
    Load::mean(terms).unwrap_or(Load::ZERO)
}
