//! Headroom (allot's extension, issue 24): how many more instances of one shape fit
//! now, counting pending claims, reserved, allocation ratios, `min_unit`, `max_unit`,
//! `step_size`, nested trees and sharing providers.
//!
//! Exact by definition: the number of successive pick-and-claims of the shape
//! (`crate::ops::pick`, in the search's order, no affinity) that would succeed, so
//! roots being drained count none. A pick
//! takes the first candidate of the first anchor (root, in creation order) that has
//! one, and usage only grows, so the picks fill the anchors one after another: all the
//! picks an anchor takes come before the next anchor's. So the count is made anchor by
//! anchor, with what each pick takes counted on top of the view's usage (an
//! [`Extra`] beside the view; the view itself is not touched). Within an anchor the search's
//! order does not depend on usage (usage only prunes), so a candidate that was first
//! and still fits is first again: it is taken as many times as it fits, in one step.
//! One anchor search per distinct candidate taken, not one per instance.
//!
//! The common shape (one unsuffixed group, no aggregates, no `in_tree`, no
//! `same_subtree`) needs no search at all ([`Simple`]): each class is one slot, the
//! slots of different classes never compete for the same amount, so the search's
//! first candidate gives each class the first of its providers (the tree's, then the
//! sharing ones tied to it) that has room, and the required traits are met by the
//! providers every candidate must use. Counted that way where those providers have
//! the traits; searched as above where they do not.

use crate::error::Result;
use crate::model::{Provider, ProviderId};
use crate::state::State;

use super::filter::{has_trait, Extra, Prepared};
use super::search::{AnchorSearch, Budget, Tables};
use super::{validate, AllocationRequest, CandidateQuery, SearchOptions};

/// How many more instances fit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headroom {
    /// In all.
    pub total: u64,
    /// Per anchor (root) that takes any, in creation order.
    pub by_anchor: Vec<(ProviderId, u64)>,
    /// Whether the search's step budget ran out (the count is then a lower bound).
    pub truncated: bool,
}

impl State {
    /// The headroom of `query`'s shape (see the module doc); refuses what
    /// [`State::allocation_candidates`] refuses.
    pub fn headroom(&self, query: &CandidateQuery, options: &SearchOptions) -> Result<Headroom> {
        self.count_shape(query, options, None)
    }

    /// The headroom of `query`'s shape, and in `fits` the anchors (roots) where one
    /// instance of it fits now, each alone on the view as it is: those that take
    /// some of the headroom, and those that take none only because the anchors
    /// before them used up a sharing pool. Past a search cut short, every anchor
    /// not counted is taken to fit (so what is left out is surely unfit).
    pub fn headroom_and_fits(
        &self,
        query: &CandidateQuery,
        options: &SearchOptions,
        fits: &mut Vec<ProviderId>,
    ) -> Result<Headroom> {
        self.count_shape(query, options, Some(fits))
    }

    fn count_shape(
        &self,
        query: &CandidateQuery,
        options: &SearchOptions,
        mut fits: Option<&mut Vec<ProviderId>>,
    ) -> Result<Headroom> {
        let mut out = Headroom::default();
        match validate::first_refusal(self, query) {
            Some(validate::Refusal::Error(e)) => return Err(e),
            Some(validate::Refusal::Empty) => return Ok(out),
            None => {}
        }
        let prepared = Prepared::new(self, query);
        if prepared.hopeless() {
            return Ok(out);
        }
        // A drained root takes no pick, so it holds no headroom.
        let anchors: Vec<ProviderId> = prepared
            .anchors()
            .map(|p| p.id())
            .filter(|&id| !self.is_drained(id))
            .collect();
        let mut extra = Extra::default();
        let mut w = Work {
            budget: Budget {
                steps_left: options.step_budget,
                exhausted: false,
                anchors: 0,
            },
            simple: Simple::of(&prepared),
            spare: Tables::default(),
            buffers: Buffers::default(),
            providers: Vec::new(),
        };
        for (i, &anchor) in anchors.iter().enumerate() {
            let placed = w.count_at(&prepared, anchor, &mut extra);
            if placed > 0 {
                out.total = out.total.saturating_add(placed);
                out.by_anchor.push((anchor, placed));
            }
            if let Some(fits) = fits.as_deref_mut() {
                // With nothing taken from a pool yet, the count saw the view as it is.
                if placed > 0 || (!extra.is_empty() && w.fits_alone(&prepared, anchor)) {
                    fits.push(anchor);
                }
                if w.budget.exhausted {
                    fits.extend_from_slice(&anchors[i + 1..]);
                }
            }
            if w.budget.exhausted {
                out.truncated = true;
                break;
            }
        }
        Ok(out)
    }
}

/// What a count keeps from anchor to anchor.
struct Work<'s> {
    budget: Budget,
    simple: Option<Simple>,
    spare: Tables,
    buffers: Buffers,
    providers: Vec<&'s Provider>,
}

impl<'s> Work<'s> {
    /// How many picks `anchor` takes, what they take counted into `extra`.
    fn count_at(
        &mut self,
        prepared: &Prepared<'s, '_>,
        anchor: ProviderId,
        extra: &mut Extra,
    ) -> u64 {
        if let Some(simple) = &self.simple {
            let counted = simple.count(
                prepared,
                anchor,
                extra,
                &mut self.buffers,
                &mut self.providers,
            );
            if let Some(placed) = counted {
                return placed;
            }
        }
        let mut placed = 0u64;
        while let Some(taken) = next_pick(
            &prepared.with_extra(extra),
            anchor,
            &mut self.budget,
            &mut self.spare,
        ) {
            for (at, amount) in taken.amounts {
                let used = extra.entry(at).or_default();
                *used = used.saturating_add(amount);
            }
            placed = placed.saturating_add(taken.copies);
            if taken.last {
                break;
            }
        }
        placed
    }

    /// Whether one pick fits at `anchor` on the view as it is (nothing taken by
    /// the anchors before it).
    fn fits_alone(&mut self, prepared: &Prepared<'s, '_>, anchor: ProviderId) -> bool {
        if let Some(simple) = &self.simple {
            let mut fresh = Extra::default();
            let counted = simple.count(
                prepared,
                anchor,
                &mut fresh,
                &mut self.buffers,
                &mut self.providers,
            );
            if let Some(placed) = counted {
                return placed > 0;
            }
        }
        next_pick(prepared, anchor, &mut self.budget, &mut self.spare).is_some()
    }
}

/// What the next pick at `anchor` takes, as many times as it fits; None when nothing
/// fits there any more.
fn next_pick(
    prep: &Prepared<'_, '_>,
    anchor: ProviderId,
    budget: &mut Budget,
    spare: &mut Tables,
) -> Option<Taken> {
    let state = prep.state;
    let slots = prep.slots_at(state.provider(anchor)?)?;
    // What only one provider of this anchor can give (a slot with one option): once
    // the copies use it up, no candidate is left here, and the search that would say
    // so is spared (the common case: a host's own VCPU and memory).
    let sole: Vec<(ProviderId, usize, u64)> = slots
        .slots
        .iter()
        .filter_map(|slot| match slot.options[..] {
            [only] => Some((slot.demands.iter(), slots.providers[only].id())),
            _ => None,
        })
        .flat_map(|(demands, id)| demands.map(move |&(k, amount)| (id, k, amount)))
        .collect();
    let mut search = AnchorSearch::new(prep, slots, None, spare);
    let candidate = search.next(budget);
    search.recycle(spare);
    let candidate = candidate?;
    let (copies, left) = copies(state, prep, &candidate);
    let amounts = candidate
        .allocations
        .iter()
        .map(|&(id, k, amount)| ((id, k), amount.saturating_mul(copies)))
        .collect();
    // A slot whose one provider no longer has room for the slot's own amount.
    let last = sole.iter().any(|&(id, k, amount)| {
        left.iter()
            .any(|&(p, c, free)| p == id && c == k && free < i128::from(amount))
    });
    Some(Taken {
        amounts,
        copies,
        last,
    })
}

/// How many times `candidate` fits as it stands (at least once: the search admitted
/// it), and what each of its providers has left of each class after that many. Each
/// copy is the same amounts, so only the capacity left limits them.
fn copies(
    state: &State,
    prep: &Prepared<'_, '_>,
    candidate: &AllocationRequest,
) -> (u64, Vec<(ProviderId, usize, i128)>) {
    let each: Vec<(ProviderId, usize, u64, i128)> = candidate
        .allocations
        .iter()
        .filter_map(|&(id, k, amount)| {
            let provider = state.provider(id)?;
            let capacity = provider
                .inventories
                .get(prep.classes[k].as_str())?
                .capacity();
            let free = capacity - i128::from(prep.used(provider, k));
            Some((id, k, amount, free))
        })
        .collect();
    let copies = each
        .iter()
        .map(|&(_, _, amount, free)| {
            u64::try_from(free / i128::from(amount.max(1))).unwrap_or(u64::MAX)
        })
        .min()
        .unwrap_or(1)
        .max(1);
    let left = each
        .iter()
        .map(|&(id, k, amount, free)| {
            (
                id,
                k,
                free.saturating_sub(i128::from(amount).saturating_mul(i128::from(copies))),
            )
        })
        .collect();
    (copies, left)
}

/// Some copies of one candidate.
struct Taken {
    /// What they take, by provider and requested class.
    amounts: Vec<((ProviderId, usize), u64)>,
    copies: u64,
    /// Whether they leave the anchor without a candidate.
    last: bool,
}

/// The common shape, counted without a search (see the module doc): one unsuffixed
/// group of `demands`, whose classes are all distinct.
struct Simple {
    /// `(class index, amount)`, one per class.
    demands: Vec<(usize, u64)>,
}

/// What [`Simple::count`] works in, kept from anchor to anchor (a cloud has tens of
/// thousands, and allocating these for each was a fifth of the count's time).
#[derive(Default)]
struct Buffers {
    /// The options of every class, class after class: `(provider index, room)`,
    /// the room before this anchor's picks.
    options: Vec<(usize, i128)>,
    /// Class `c`'s options are `options[starts[c]..starts[c + 1]]`.
    starts: Vec<usize>,
    /// What this anchor's picks (and, for a pool, the anchors' before) take of
    /// each option.
    taken: Vec<u64>,
    /// The option each class takes in the current pick.
    chosen: Vec<usize>,
    /// Where `Prepared::anchor_providers_into` lists the pools tied to the anchor.
    ids: Vec<ProviderId>,
    /// Per provider of the anchor: whether a forbidden trait keeps it out, whether it
    /// is a pool.
    kinds: Vec<(bool, bool)>,
    /// The pools' room by pool and requested class (None: it cannot give the class),
    /// as the view has it: a pool is tied to thousands of anchors.
    pools: Vec<((ProviderId, usize), Option<i128>)>,
}

impl Simple {
    /// The shape, if `prep` has it.
    fn of(prep: &Prepared<'_, '_>) -> Option<Simple> {
        let [group] = &prep.groups[..] else {
            return None;
        };
        let req = group.request;
        let simple = !group.granular
            && !prep.one_provider_per_tree
            && prep.same_subtrees.is_empty()
            && req.member_of.is_empty()
            && req.forbidden_aggregates.is_empty()
            && req.in_tree.is_none()
            && !group.demands.is_empty()
            && group.demands.iter().all(|&(_, amount)| amount > 0)
            && group
                .demands
                .iter()
                .enumerate()
                .all(|(i, &(k, _))| group.demands[..i].iter().all(|&(other, _)| other != k));
        simple.then(|| Simple {
            demands: group.demands.clone(),
        })
    }

    /// Lists in `b` the options of each class at an anchor whose providers are
    /// `providers`, in the search's order, with their room and what earlier roots
    /// took of the pools; false when some class has none.
    fn lay_out(
        &self,
        prep: &Prepared<'_, '_>,
        providers: &[&Provider],
        extra: &Extra,
        b: &mut Buffers,
    ) -> bool {
        let req = prep.groups[0].request;
        // What each provider is, looked up once, not once per class: kept out by a
        // forbidden trait, a pool.
        b.kinds.clear();
        b.kinds.extend(providers.iter().map(|p| {
            (
                req.forbidden.iter().any(|t| has_trait(p, t)),
                prep.is_sharing(p.id()),
            )
        }));
        b.options.clear();
        b.starts.clear();
        b.taken.clear();
        for &(k, amount) in &self.demands {
            b.starts.push(b.options.len());
            let class = prep.classes[k].as_str();
            let room = |p: &Provider| {
                let inv = p.inventories.get(class)?;
                inv.units().admits(amount).ok()?;
                Some(inv.capacity() - i128::from(prep.used(p, k)))
            };
            for (i, p) in providers.iter().enumerate() {
                let (forbidden, pool) = b.kinds[i];
                if forbidden {
                    continue;
                }
                let room = if pool {
                    let key = (p.id(), k);
                    match b.pools.iter().find(|(at, _)| *at == key) {
                        Some(&(_, room)) => room,
                        None => {
                            let room = room(p);
                            b.pools.push((key, room));
                            room
                        }
                    }
                } else {
                    room(p)
                };
                let Some(room) = room else {
                    continue;
                };
                b.options.push((i, room));
                b.taken.push(if pool {
                    extra.get(&(p.id(), k)).copied().unwrap_or(0)
                } else {
                    0
                });
            }
            if b.options.len() == b.starts[b.starts.len() - 1] {
                return false;
            }
        }
        b.starts.push(b.options.len());
        true
    }

    /// How many picks `anchor` takes, the pools' share counted into `extra`; None
    /// when the shape's traits need the search there.
    fn count<'s>(
        &self,
        prep: &Prepared<'s, '_>,
        anchor: ProviderId,
        extra: &mut Extra,
        b: &mut Buffers,
        providers: &mut Vec<&'s Provider>,
    ) -> Option<u64> {
        let root = prep.state.provider(anchor)?;
        if !prep.root_allowed(root) {
            return Some(0);
        }
        let req = prep.groups[0].request;
        prep.anchor_providers_into(root, providers, &mut b.ids);
        let providers = &providers[..];
        // No provider here has a required trait: no candidate.
        let anywhere = |t: &_| providers.iter().any(|p| has_trait(p, t));
        if !req.required.iter().all(|any| any.iter().any(anywhere)) {
            return Some(0);
        }
        if !self.lay_out(prep, providers, extra, b) {
            return Some(0);
        }
        let n = self.demands.len();
        // Every candidate uses the providers that are a class's only option; if they
        // have the required traits, every candidate has them. If not even all the
        // options have them, no candidate does.
        if !req.required.is_empty() {
            let sure = |t: &_| {
                (0..n).any(|c| {
                    let (from, to) = (b.starts[c], b.starts[c + 1]);
                    to - from == 1 && has_trait(providers[b.options[from].0], t)
                })
            };
            if !req.required.iter().all(|any| any.iter().any(sure)) {
                let anywhere = |t: &_| b.options.iter().any(|&(i, _)| has_trait(providers[i], t));
                let possible = req.required.iter().all(|any| any.iter().any(anywhere));
                return if possible { None } else { Some(0) };
            }
        }
        b.chosen.clear();
        b.chosen.resize(n, 0);
        let mut placed = 0u64;
        loop {
            // Each class's first option with room, and how many copies it has room
            // for.
            let mut copies = u64::MAX;
            for (c, &(_, amount)) in self.demands.iter().enumerate() {
                let found = (b.starts[c]..b.starts[c + 1]).find_map(|o| {
                    let room = b.options[o].1 - i128::from(b.taken[o]);
                    (room >= i128::from(amount)).then_some((o, room))
                });
                let Some((o, room)) = found else {
                    // Done here: the pools' totals for the anchors after.
                    for c in 0..n {
                        let k = self.demands[c].0;
                        for o in b.starts[c]..b.starts[c + 1] {
                            let (i, _) = b.options[o];
                            if b.taken[o] > 0 && b.kinds[i].1 {
                                extra.insert((providers[i].id(), k), b.taken[o]);
                            }
                        }
                    }
                    return Some(placed);
                };
                copies = copies.min(u64::try_from(room / i128::from(amount)).unwrap_or(u64::MAX));
                b.chosen[c] = o;
            }
            for (c, &(_, amount)) in self.demands.iter().enumerate() {
                let o = b.chosen[c];
                b.taken[o] = b.taken[o].saturating_add(amount.saturating_mul(copies));
            }
            placed = placed.saturating_add(copies);
        }
    }
}
