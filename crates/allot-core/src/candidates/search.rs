//! The search at one anchor: which provider takes each slot.
//!
//! # Interchangeable providers
//!
//! Many clouds have trees of identical devices (sixteen one-`VGPU` children). Trying
//! every provider for every slot would explore `16!/8!` assignments for eight slots
//! before learning anything, and far more when the request cannot fit. So providers
//! that no rule of the request can tell apart are put in one *class*: same slots they
//! may take, same free capacity and `max_unit` for every requested class, same
//! standing against the required traits of the unsuffixed group and, when the tree's
//! shape matters to the request (`same_subtree`, or one provider per tree before
//! 1.29), same parent and no children, so that swapping two of them is a symmetry of
//! the whole tree. Every rule then gives the same verdict before and after such a
//! swap.
//!
//! The search walks *canonical* assignments only: within a class, a slot may take a
//! member already used by an earlier slot of this candidate, or the first member not
//! used yet, never a later one. Each assignment of concrete providers has exactly one
//! canonical form (name members in the order slots first use them), so the walk
//! decides feasibility once per class-level shape, and a request that cannot fit on
//! sixteen identical children fails after sixteen steps, not sixteen factorial.
//!
//! Each canonical assignment that passes every rule is then *expanded* lazily: the
//! `k` members it uses in a class of `n` are replaced by each ordered choice of `k`
//! distinct members (`n!/(n-k)!` of them), which are distinct candidates (their
//! mappings differ) and all valid. The caller stops pulling when it has enough.
//!
//! # Pruning
//!
//! Before going deeper the walk checks that every remaining slot still has a member
//! that fits, that the remaining demand of each class does not exceed what the
//! remaining slots' providers have free, and, with `group_policy=isolate`, that the
//! remaining suffixed slots can still be given distinct providers (a bipartite
//! matching). A step budget bounds what is left of the worst case.

use std::mem::take;

use crate::model::{Provider, ProviderId};
use crate::names::{RequestedName, TraitName};

use super::filter::{has_trait, AnchorSlots, Capacity, Prepared, Slot};
use super::{AllocationRequest, Rng};

/// A rule checked once all its slots have a provider.
#[derive(Debug, Clone)]
enum Check {
    /// One of these slots' providers is an ancestor (or the same) of all the others.
    SameSubtree(Vec<usize>),
    /// The providers of these (unsuffixed) slots have, together, at least one trait
    /// of every required any-of set.
    Traits(Vec<usize>),
}

/// What stops a walk early.
pub(super) struct Budget {
    /// Steps left (one step: one provider tried for one slot).
    pub steps_left: u64,
    /// Set when the budget ran out.
    pub exhausted: bool,
    /// Anchors (roots) the search has visited so far: what a search cut short
    /// reports as explored.
    pub anchors: usize,
}

/// The tables of one anchor search, which outlive it: a request visits thousands of
/// anchors, and allocating each search's tables anew cost about a tenth of a large
/// answer's time (malloc and free), so a finished search hands them to the next one
/// (see [`AnchorSearch::recycle`]).
#[derive(Default)]
pub(super) struct Tables {
    /// Involved providers, class by class.
    members: Vec<ProviderId>,
    /// Class `c` owns `members[class_start[c]..class_start[c + 1]]`.
    class_start: Vec<usize>,
    /// Free capacity, by member and requested class (negative: over-committed).
    free: Vec<i64>,
    /// `max_unit`, by member and requested class.
    max_unit: Vec<u64>,
    /// Required-trait coverage of each member, `trait_words` words per member.
    trait_mask: Vec<u64>,
    /// The root of each member (for one provider per tree).
    root_of: Vec<ProviderId>,

    // ---- the walk ----
    /// Members opened so far in each class.
    opened: Vec<usize>,
    /// Amounts taken so far, by member and requested class.
    consumed: Vec<u64>,
    /// Suffixed slots placed on each member.
    granular_taken: Vec<u32>,
    /// The choice at each decided depth: (class, index within the class).
    choice: Vec<(usize, usize)>,
    /// Whether the choice at each depth opened a new member.
    opened_here: Vec<bool>,
    /// The next choice to try at each depth: (position in `slot_classes`, index).
    cursor: Vec<(usize, usize)>,

    // ---- the expansion of the current canonical assignment ----
    /// Classes used by the current assignment.
    used_classes: Vec<usize>,
}

impl Tables {
    /// Empties every table, keeping what each has allocated.
    fn clear(&mut self) {
        self.members.clear();
        self.class_start.clear();
        self.free.clear();
        self.max_unit.clear();
        self.trait_mask.clear();
        self.root_of.clear();
        self.opened.clear();
        self.consumed.clear();
        self.granular_taken.clear();
        self.choice.clear();
        self.opened_here.clear();
        self.cursor.clear();
        self.used_classes.clear();
    }

    /// Lays out the members class by class (`by_class` as [`interchangeable`] gives
    /// it), each with its free capacity, `max_unit`, trait coverage and root.
    fn lay_out_members(
        &mut self,
        by_class: &[Vec<usize>],
        keys: &[ProviderKey<'_>],
        involved: &[usize],
        providers: &[&Provider],
    ) {
        for list in by_class {
            self.class_start.push(self.members.len());
            for &k in list {
                let p = providers[involved[k]];
                self.members.push(p.id());
                for &(f, m) in &keys[k].capacity {
                    self.free.push(f);
                    self.max_unit.push(m);
                }
                self.trait_mask.extend_from_slice(&keys[k].traits);
                self.root_of.push(p.row.root);
            }
        }
        self.class_start.push(self.members.len());
    }

    /// Sizes the walk's tables for the members laid out, `n_classes` classes,
    /// `n_slots` slots and `width` requested classes, every entry at its start.
    fn size_walk(&mut self, n_classes: usize, n_slots: usize, width: usize) {
        let n_members = self.members.len();
        self.opened.resize(n_classes, 0);
        self.consumed.resize(n_members * width, 0);
        self.granular_taken.resize(n_members, 0);
        self.choice.resize(n_slots, (0, 0));
        self.opened_here.resize(n_slots, false);
        self.cursor.resize(n_slots, (0, 0));
    }
}

/// The required traits of the unsuffixed group (any-of sets), none without one: the
/// traits a candidate's unsuffixed slots must cover together.
fn unsuffixed_required<'p>(prep: &'p Prepared<'_, '_>) -> &'p [Vec<RequestedName<TraitName>>] {
    prep.groups
        .iter()
        .find(|g| !g.granular)
        .map(|g| g.request.required.as_slice())
        .unwrap_or(&[])
}

/// Which providers of an anchor may take which of its slots.
struct Involvement {
    /// The slots each provider may take, as bits: `slot_words` words per provider
    /// (by its index in [`AnchorSlots::providers`]).
    slot_bits: Vec<u64>,
    /// Words per provider in `slot_bits`.
    slot_words: usize,
    /// The providers that may take some slot, each once, in the anchor's order.
    involved: Vec<usize>,
}

impl Involvement {
    /// Every involved provider once (in the anchor's order), with the slots it may
    /// take.
    fn of(slots: &[Slot], n_providers: usize) -> Self {
        let slot_words = slots.len().div_ceil(64).max(1);
        let mut slot_bits: Vec<u64> = vec![0; n_providers * slot_words];
        let mut is_involved = vec![false; n_providers];
        for (s, slot) in slots.iter().enumerate() {
            for &i in &slot.options {
                is_involved[i] = true;
                slot_bits[i * slot_words + s / 64] |= 1 << (s % 64);
            }
        }
        let involved: Vec<usize> = (0..n_providers).filter(|&i| is_involved[i]).collect();
        Involvement {
            slot_bits,
            slot_words,
            involved,
        }
    }

    /// The slot bits of provider `i`.
    fn slots_of(&self, i: usize) -> &[u64] {
        &self.slot_bits[i * self.slot_words..(i + 1) * self.slot_words]
    }
}

/// What tells providers apart: the slots they may take, their free capacity and
/// max_unit, their standing against the unsuffixed group's required traits, and,
/// when the tree's shape matters, their place in it. Providers with equal keys are
/// interchangeable (see the module doc).
#[derive(PartialEq, Eq, Hash)]
struct ProviderKey<'a> {
    slots: &'a [u64],
    capacity: Vec<(i64, u64)>,
    traits: Vec<u64>,
    place: Option<(Option<ProviderId>, Option<ProviderId>)>,
}

/// The key of every involved provider, in the order of `involvement.involved`.
fn provider_keys<'a>(
    prep: &Prepared<'_, '_>,
    involvement: &'a Involvement,
    providers: &[&Provider],
    capacity: &[Capacity],
    required: &[Vec<RequestedName<TraitName>>],
) -> Vec<ProviderKey<'a>> {
    let width = prep.classes.len();
    let trait_words = required.len().div_ceil(64);
    let structure_matters = !prep.same_subtrees.is_empty() || prep.one_provider_per_tree;
    let mut keys: Vec<ProviderKey<'_>> = Vec::with_capacity(involvement.involved.len());
    for &i in &involvement.involved {
        let p = providers[i];
        let capacity = capacity[i * width..(i + 1) * width]
            .iter()
            .map(|c| (c.free, c.units.max_unit))
            .collect();
        let mut traits = vec![0u64; trait_words];
        for (t, any) in required.iter().enumerate() {
            if any.iter().any(|name| has_trait(p, name)) {
                traits[t / 64] |= 1 << (t % 64);
            }
        }
        let place = structure_matters.then(|| {
            let leaf = p.children.is_empty();
            (p.row.parent, if leaf { None } else { Some(p.id()) })
        });
        keys.push(ProviderKey {
            slots: involvement.slots_of(i),
            capacity,
            traits,
            place,
        });
    }
    keys
}

/// The classes of interchangeable providers (equal keys): for each class, the index
/// into `keys` of its first member, and all its members (indices into `keys`), in
/// order of first appearance. A few keys are compared pairwise, more are hashed.
fn interchangeable(keys: &[ProviderKey<'_>]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut class_of_key: Vec<usize> = Vec::with_capacity(keys.len());
    let mut distinct: Vec<usize> = Vec::new(); // index into keys of each class's first
    if keys.len() <= 16 {
        for (i, key) in keys.iter().enumerate() {
            let c = match distinct.iter().position(|&d| keys[d] == *key) {
                Some(c) => c,
                None => {
                    distinct.push(i);
                    distinct.len() - 1
                }
            };
            class_of_key.push(c);
        }
    } else {
        let mut seen: std::collections::HashMap<&ProviderKey<'_>, usize> =
            std::collections::HashMap::new();
        for (i, key) in keys.iter().enumerate() {
            let c = *seen.entry(key).or_insert_with(|| {
                distinct.push(i);
                distinct.len() - 1
            });
            class_of_key.push(c);
        }
    }
    let mut by_class: Vec<Vec<usize>> = vec![Vec::new(); distinct.len()];
    for (i, &c) in class_of_key.iter().enumerate() {
        by_class[c].push(i);
    }
    (distinct, by_class)
}

/// For each slot, the classes whose members may take it (`distinct` as
/// [`interchangeable`] gives it).
fn slot_classes(keys: &[ProviderKey<'_>], distinct: &[usize], n_slots: usize) -> Vec<Vec<usize>> {
    (0..n_slots)
        .map(|s| {
            (0..distinct.len())
                .filter(|&c| keys[distinct[c]].slots[s / 64] & (1 << (s % 64)) != 0)
                .collect()
        })
        .collect()
}

/// The rules to check at each depth of the walk: each once its last slot is decided.
fn checks_at(prep: &Prepared<'_, '_>, slots: &[Slot], trait_sets: usize) -> Vec<Vec<Check>> {
    let n_slots = slots.len();
    let mut checks_at: Vec<Vec<Check>> = vec![Vec::new(); n_slots];
    for set in &prep.same_subtrees {
        let positions: Vec<usize> = (0..n_slots)
            .filter(|&s| set.contains(&slots[s].group))
            .collect();
        if let Some(&last) = positions.last() {
            checks_at[last].push(Check::SameSubtree(positions));
        }
    }
    if trait_sets > 0 {
        let positions: Vec<usize> = (0..n_slots).filter(|&s| !slots[s].granular).collect();
        if let Some(&last) = positions.last() {
            checks_at[last].push(Check::Traits(positions));
        }
    }
    checks_at
}

/// The search at one anchor, resumable: each call to [`AnchorSearch::next`] gives the
/// next candidate.
pub(super) struct AnchorSearch<'p, 's, 'q> {
    prep: &'p Prepared<'s, 'q>,
    /// The slots, in the order the walk decides them.
    slots: Vec<Slot>,
    /// For each slot, the classes whose members may take it.
    slot_classes: Vec<Vec<usize>>,
    /// Number of requested resource classes (the width of the by-member tables).
    width: usize,
    trait_words: usize,
    trait_sets: usize,
    isolate: bool,
    /// Rules to check when the walk has decided slot `d`.
    checks_at: Vec<Vec<Check>>,
    /// The members with what they hold, and the state of the walk and expansion.
    t: Tables,
    depth: usize,
    started: bool,
    finished: bool,
    expanding: bool,
    /// For each class, the current ordering of its members (the first `opened[c]`
    /// stand for the members the canonical assignment used).
    perms: Vec<Vec<usize>>,
}

impl<'p, 's, 'q> AnchorSearch<'p, 's, 'q> {
    /// Sets up the search for the slots of one anchor, in the tables `spare` holds
    /// (see [`AnchorSearch::recycle`]).
    pub fn new(
        prep: &'p Prepared<'s, 'q>,
        anchor: AnchorSlots<'s>,
        rng: Option<&mut Rng>,
        spare: &mut Tables,
    ) -> Self {
        let width = prep.classes.len();
        let required = unsuffixed_required(prep);
        let trait_sets = required.len();
        let AnchorSlots {
            slots: mut given,
            providers,
            capacity,
        } = anchor;

        // Decide the most constrained slots first.
        given.sort_by_key(|slot| slot.options.len());
        let slots = given;
        let n_slots = slots.len();

        let involvement = Involvement::of(&slots, providers.len());
        let keys = provider_keys(prep, &involvement, &providers, &capacity, required);
        let (distinct, mut by_class) = interchangeable(&keys);
        let n_classes = distinct.len();
        let mut rng = rng;
        if let Some(rng) = rng.as_deref_mut() {
            for list in &mut by_class {
                rng.shuffle(list);
            }
        }
        let mut t = take(spare);
        t.clear();
        t.lay_out_members(&by_class, &keys, &involvement.involved, &providers);
        let mut slot_classes = slot_classes(&keys, &distinct, n_slots);
        if let Some(rng) = rng {
            for list in &mut slot_classes {
                rng.shuffle(list);
            }
        }
        let checks_at = checks_at(prep, &slots, trait_sets);
        t.size_walk(n_classes, n_slots, width);
        AnchorSearch {
            prep,
            slots,
            slot_classes,
            width,
            trait_words: trait_sets.div_ceil(64),
            trait_sets,
            isolate: prep.query.isolate,
            checks_at,
            t,
            depth: 0,
            started: false,
            finished: false,
            expanding: false,
            perms: (0..n_classes).map(|_| Vec::new()).collect(),
        }
    }

    /// Hands this search's tables to the next one.
    pub fn recycle(self, spare: &mut Tables) {
        *spare = self.t;
    }

    fn class_len(&self, c: usize) -> usize {
        self.t.class_start[c + 1] - self.t.class_start[c]
    }

    /// The member index (into `members`) of canonical choice `(c, j)`.
    fn member(&self, c: usize, j: usize) -> usize {
        self.t.class_start[c] + j
    }

    /// Whether member `m` can take slot `s` now.
    fn fits(&self, s: usize, m: usize) -> bool {
        let slot = &self.slots[s];
        if self.isolate && slot.granular && self.t.granular_taken[m] > 0 {
            return false;
        }
        slot.demands.iter().all(|&(k, amount)| {
            let after = self.t.consumed[m * self.width + k].saturating_add(amount);
            (after as i128) <= self.t.free[m * self.width + k] as i128
                && after <= self.t.max_unit[m * self.width + k]
        })
    }

    fn place(&mut self, s: usize, m: usize, sign: bool) {
        let slot = &self.slots[s];
        for &(k, amount) in &slot.demands {
            let cell = &mut self.t.consumed[m * self.width + k];
            if sign {
                *cell += amount;
            } else {
                *cell -= amount;
            }
        }
        if slot.granular {
            if sign {
                self.t.granular_taken[m] += 1;
            } else {
                self.t.granular_taken[m] -= 1;
            }
        }
    }

    /// Takes the next choice at depth `d` from its cursor, applies it and returns
    /// true; false when depth `d` has no choice left.
    fn try_next_choice(&mut self, d: usize, budget: &mut Budget) -> bool {
        loop {
            let (ci, j) = self.t.cursor[d];
            if ci >= self.slot_classes[d].len() {
                return false;
            }
            let c = self.slot_classes[d][ci];
            let opened = self.t.opened[c];
            // Members already used in this class, then the first unused one.
            let limit = if opened < self.class_len(c) {
                opened + 1
            } else {
                opened
            };
            if j >= limit {
                self.t.cursor[d] = (ci + 1, 0);
                continue;
            }
            self.t.cursor[d] = (ci, j + 1);
            if budget.steps_left == 0 {
                budget.exhausted = true;
                return false;
            }
            budget.steps_left -= 1;
            let m = self.member(c, j);
            if !self.fits(d, m) {
                continue;
            }
            if self.prep.one_provider_per_tree
                && !self.slots[d].demands.is_empty()
                && (0..d).any(|e| {
                    let (ce, je) = self.t.choice[e];
                    let other = self.member(ce, je);
                    other != m
                        && !self.slots[e].demands.is_empty()
                        && self.t.root_of[other] == self.t.root_of[m]
                })
            {
                continue;
            }
            self.t.choice[d] = (c, j);
            self.t.opened_here[d] = j == opened;
            if j == opened {
                self.t.opened[c] += 1;
            }
            self.place(d, m, true);
            if self.checks_pass(d) && self.rest_feasible(d + 1) {
                return true;
            }
            self.undo(d);
        }
    }

    fn undo(&mut self, d: usize) {
        let (c, j) = self.t.choice[d];
        let m = self.member(c, j);
        self.place(d, m, false);
        if self.t.opened_here[d] {
            self.t.opened[c] -= 1;
        }
    }

    /// The rules whose last slot is `d`.
    fn checks_pass(&self, d: usize) -> bool {
        self.checks_at[d].iter().all(|check| match check {
            Check::SameSubtree(positions) => {
                let mut ids: Vec<ProviderId> = positions
                    .iter()
                    .map(|&s| {
                        let (c, j) = self.t.choice[s];
                        self.t.members[self.member(c, j)]
                    })
                    .collect();
                ids.sort_unstable();
                ids.dedup();
                ids.len() <= 1
                    || ids
                        .iter()
                        .any(|&top| ids.iter().all(|&p| self.is_ancestor_or_self(top, p)))
            }
            Check::Traits(positions) => {
                let mut have = vec![0u64; self.trait_words];
                for &s in positions {
                    let (c, j) = self.t.choice[s];
                    let m = self.member(c, j);
                    for (w, word) in have.iter_mut().enumerate() {
                        *word |= self.t.trait_mask[m * self.trait_words + w];
                    }
                }
                (0..self.trait_sets).all(|i| have[i / 64] & (1 << (i % 64)) != 0)
            }
        })
    }

    fn is_ancestor_or_self(&self, top: ProviderId, mut p: ProviderId) -> bool {
        loop {
            if p == top {
                return true;
            }
            match self.prep.state.provider(p).and_then(|x| x.row.parent) {
                Some(parent) => p = parent,
                None => return false,
            }
        }
    }

    /// Whether the slots from `from` on can still be filled, by necessary conditions.
    fn rest_feasible(&self, from: usize) -> bool {
        let n = self.slots.len();
        if from >= n {
            return true;
        }
        // Every remaining slot has a member that fits now.
        for s in from..n {
            let any = self.slot_classes[s].iter().any(|&c| {
                let opened = self.t.opened[c];
                (0..opened).any(|j| self.fits(s, self.member(c, j)))
                    || (opened < self.class_len(c) && self.fits(s, self.member(c, opened)))
            });
            if !any {
                return false;
            }
        }
        // The remaining demand of each class fits in what their providers have free,
        // and there are enough places for the slots that want it: a member can take
        // at most `left / smallest demand` of them.
        for k in 0..self.width {
            let mut need: u64 = 0;
            let mut slots_wanting = 0u64;
            let mut smallest = u64::MAX;
            for s in from..n {
                for &(kk, amount) in &self.slots[s].demands {
                    if kk == k {
                        need = need.saturating_add(amount);
                        slots_wanting += 1;
                        smallest = smallest.min(amount);
                    }
                }
            }
            if need == 0 {
                continue;
            }
            let mut wanted = vec![false; self.class_len_count()];
            for s in from..n {
                if self.slots[s].demands.iter().any(|(kk, _)| *kk == k) {
                    for &c in &self.slot_classes[s] {
                        wanted[c] = true;
                    }
                }
            }
            let mut free: i128 = 0;
            let mut places: u64 = 0;
            for c in (0..wanted.len()).filter(|&c| wanted[c]) {
                for m in self.t.class_start[c]..self.t.class_start[c + 1] {
                    let cell = m * self.width + k;
                    let consumed = self.t.consumed[cell] as i128;
                    let left = (self.t.free[cell] as i128 - consumed)
                        .min(self.t.max_unit[cell] as i128 - consumed)
                        .max(0);
                    free += left;
                    places = places.saturating_add((left / smallest.max(1) as i128) as u64);
                }
                if free >= need as i128 && places >= slots_wanting {
                    break;
                }
            }
            if free < need as i128 || places < slots_wanting {
                return false;
            }
        }
        // With isolation, the remaining suffixed slots need distinct free members.
        if self.isolate {
            let pending: Vec<usize> = (from..n).filter(|&s| self.slots[s].granular).collect();
            if pending.len() > 1 && !self.distinct_members_exist(&pending) {
                return false;
            }
        }
        true
    }

    fn class_len_count(&self) -> usize {
        self.t.class_start.len() - 1
    }

    /// Kuhn's matching: can each pending suffixed slot get its own member that fits?
    fn distinct_members_exist(&self, pending: &[usize]) -> bool {
        let edges: Vec<Vec<usize>> = pending
            .iter()
            .map(|&s| {
                self.slot_classes[s]
                    .iter()
                    .flat_map(|&c| self.t.class_start[c]..self.t.class_start[c + 1])
                    .filter(|&m| self.fits(s, m))
                    .collect()
            })
            .collect();
        let mut owner: Vec<Option<usize>> = vec![None; self.t.members.len()];
        fn augment(
            i: usize,
            edges: &[Vec<usize>],
            owner: &mut [Option<usize>],
            seen: &mut [bool],
        ) -> bool {
            for &m in &edges[i] {
                if seen[m] {
                    continue;
                }
                seen[m] = true;
                if owner[m].is_none_or(|o| augment(o, edges, owner, seen)) {
                    owner[m] = Some(i);
                    return true;
                }
            }
            false
        }
        for i in 0..pending.len() {
            let mut seen = vec![false; self.t.members.len()];
            if !augment(i, &edges, &mut owner, &mut seen) {
                return false;
            }
        }
        true
    }

    /// Finds the next complete canonical assignment; false when there is none.
    fn advance_walk(&mut self, budget: &mut Budget) -> bool {
        let n = self.slots.len();
        if n == 0 {
            // Cannot happen (every request has a group with resources), but an empty
            // request has exactly one, empty, answer.
            if self.started {
                return false;
            }
            self.started = true;
            return true;
        }
        if !self.started {
            self.started = true;
            self.depth = 0;
            self.t.cursor[0] = (0, 0);
            if !self.rest_feasible(0) {
                return false;
            }
        } else {
            // Resume after the last complete assignment: retract its deepest choice.
            self.depth = n - 1;
            self.undo(n - 1);
        }
        loop {
            let d = self.depth;
            if self.try_next_choice(d, budget) {
                if d + 1 == n {
                    return true;
                }
                self.depth = d + 1;
                self.t.cursor[d + 1] = (0, 0);
            } else {
                if d == 0 || budget.exhausted {
                    return false;
                }
                self.depth = d - 1;
                self.undo(d - 1);
            }
        }
    }

    /// The next candidate of this anchor, or None when there are no more.
    pub fn next(&mut self, budget: &mut Budget) -> Option<AllocationRequest> {
        if self.finished {
            return None;
        }
        if self.expanding && self.next_expansion() {
            return Some(self.emit());
        }
        self.expanding = false;
        if !self.advance_walk(budget) {
            self.finished = true;
            return None;
        }
        // Start expanding this canonical assignment from itself.
        self.t.used_classes.clear();
        for c in 0..self.class_len_count() {
            if self.t.opened[c] > 0 {
                self.t.used_classes.push(c);
                self.perms[c] = (0..self.class_len(c)).collect();
            }
        }
        self.expanding = true;
        Some(self.emit())
    }

    /// Moves to the next ordering of the used members; false when all were given.
    fn next_expansion(&mut self) -> bool {
        for i in (0..self.t.used_classes.len()).rev() {
            let c = self.t.used_classes[i];
            let k = self.t.opened[c];
            if next_k_permutation(&mut self.perms[c], k) {
                return true;
            }
            // This class wrapped around to its first ordering: carry to the previous.
        }
        false
    }

    /// The concrete candidate of the current assignment and ordering.
    fn emit(&self) -> AllocationRequest {
        let n_groups = self.prep.groups.len();
        let mut allocations: Vec<(ProviderId, usize, u64)> = Vec::new();
        let mut mappings: Vec<Vec<ProviderId>> = vec![Vec::new(); n_groups];
        for (s, slot) in self.slots.iter().enumerate() {
            let (c, j) = self.t.choice[s];
            let m = self.t.class_start[c] + self.perms[c].get(j).copied().unwrap_or(j);
            let id = self.t.members[m];
            for &(k, amount) in &slot.demands {
                allocations.push((id, k, amount));
            }
            mappings[slot.group].push(id);
        }
        allocations.sort_unstable();
        let mut merged: Vec<(ProviderId, usize, u64)> = Vec::with_capacity(allocations.len());
        for (id, k, amount) in allocations {
            match merged.last_mut() {
                Some(last) if last.0 == id && last.1 == k => last.2 += amount,
                _ => merged.push((id, k, amount)),
            }
        }
        for list in &mut mappings {
            list.sort_unstable();
            list.dedup();
        }
        AllocationRequest {
            allocations: merged,
            mappings,
        }
    }
}

/// Advances `a` (a permutation of `0..a.len()`) to the next ordering of its first `k`
/// elements in lexicographic order; on the last one, resets `a` to the identity and
/// returns false.
pub(super) fn next_k_permutation(a: &mut [usize], k: usize) -> bool {
    if k < a.len() {
        a[k..].reverse();
    }
    next_permutation(a)
}

fn next_permutation(a: &mut [usize]) -> bool {
    let n = a.len();
    if n < 2 {
        return false;
    }
    let mut i = n - 1;
    while i > 0 && a[i - 1] >= a[i] {
        i -= 1;
    }
    if i == 0 {
        a.reverse();
        return false;
    }
    let mut j = n - 1;
    while a[j] <= a[i - 1] {
        j -= 1;
    }
    a.swap(i - 1, j);
    a[i..].reverse();
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k_permutations_in_order() {
        let mut a: Vec<usize> = (0..4).collect();
        let mut seen = vec![a[..2].to_vec()];
        while next_k_permutation(&mut a, 2) {
            seen.push(a[..2].to_vec());
        }
        assert_eq!(seen.len(), 12);
        let mut sorted = seen.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, seen, "lexicographic and distinct");
        assert_eq!(a, vec![0, 1, 2, 3], "back to the identity");

        let mut b: Vec<usize> = (0..3).collect();
        let mut n = 1;
        while next_k_permutation(&mut b, 3) {
            n += 1;
        }
        assert_eq!(n, 6);
        let mut one = vec![0];
        assert!(!next_k_permutation(&mut one, 1));
    }
}
