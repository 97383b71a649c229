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
//!    allocation_ratio`; `pack` puts the most loaded first (fill hosts before opening
//!    new ones), `spread` the least loaded; `random` shuffles instead, with a seed the
//!    caller draws.
//!
//! Candidates equal on both keys keep the search's order (providers in creation
//! order), so the answer is the same for the same state, except with `random`.

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
        Some(Sort::Pack) => Some(-1.0),
        Some(Sort::Spread) => Some(1.0),
        Some(Sort::Random(_)) | None => None,
    };
    // Each key computed once per candidate, not once per comparison.
    let mut keyed: Vec<(usize, f64, AllocationRequest)> = requests
        .drain(..)
        .map(|r| {
            let prefer = preferred_count(state, &r, &preferred);
            let load = by_load.map_or(0.0, |sign| sign * load(state, classes, &r, now));
            (prefer, load, r)
        })
        .collect();
    keyed.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.total_cmp(&b.1)));
    requests.extend(keyed.into_iter().map(|(_, _, r)| r));
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

/// The mean of `used / capacity` over the candidate's allocations, before it.
pub fn load(
    state: &State,
    classes: &[ResourceClass],
    r: &AllocationRequest,
    now: Timestamp,
) -> f64 {
    let ratios: Vec<f64> = r
        .allocations
        .iter()
        .filter_map(|&(id, k, _)| {
            let provider = state.provider(id)?;
            let class = &classes[k];
            let capacity = provider.inventories.get(class.as_str())?.capacity();
            // A capacity of 0 or less holds nothing this candidate could take; it
            // cannot be in a candidate, but a ratio must not divide by it.
            (capacity > 0).then(|| provider.used(class.as_str(), now) as f64 / capacity as f64)
        })
        .collect();
    if ratios.is_empty() {
        return 0.0;
    }
    ratios.iter().sum::<f64>() / ratios.len() as f64
}
