//! Which providers may serve which part of a request, anchor by anchor.
//!
//! A candidate is built around one *anchor*: a root provider whose tree supplies the
//! resources, helped by sharing providers (`MISC_SHARES_VIA_AGGREGATE`) tied to that
//! tree through an aggregate. This module turns a request into *slots*, the smallest
//! decisions of a candidate, and lists for one anchor the providers each slot may use:
//!
//! - a suffixed group is one slot: all its resources come from one provider, which
//!   has room for each of them, the group's traits and aggregates itself, and lies
//!   in the anchor's tree or is a sharing provider tied to it;
//! - the unsuffixed group is one slot per resource class: each class comes whole from
//!   one provider of the anchor's tree or one tied sharing provider, with aggregates
//!   judged on the provider *or the anchor*, forbidden traits on every provider used,
//!   and required traits on the providers used *together* (checked by the search).
//!
//! A sharing provider is *tied* to an anchor when it shares an aggregate with any
//! provider of the anchor's tree (the rule in full, in Placement's terms: `super`'s
//! module doc); a sharing provider of the anchor's own tree is simply one of the tree's
//! providers. `in_tree` pins a suffixed group's provider to a
//! tree (a sharing provider of that tree may still serve other anchors), and pins the
//! unsuffixed group to that tree without sharing providers; a suffixed group without
//! resources ignores it, and selects nothing unless it has traits or aggregates.
//!
//! These are Placement's rules, read from its behaviour; the rest (how slots combine)
//! is the search's business (`super::search`).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::num::NonZeroU64;

use uuid::Uuid;

use crate::model::{Provider, ProviderId, Units};
use crate::names::{RequestedName, ResourceClass, TraitName};
use crate::state::State;

use super::{CandidateQuery, RequestGroup};

/// Where a group's `in_tree` points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InTree {
    /// No `in_tree`.
    Anywhere,
    /// The root of the named provider's tree.
    Root(ProviderId),
    /// The named provider does not exist: the group matches nothing.
    Missing,
}

/// One request group, resolved against the state.
#[derive(Debug, Clone)]
pub(super) struct Group<'q> {
    /// The request as given.
    pub request: &'q RequestGroup,
    /// Whether the group is suffixed (all from one provider).
    pub granular: bool,
    /// `(class index, amount)` for each requested class, in request order.
    pub demands: Vec<(usize, u64)>,
    /// Where `in_tree` points.
    pub in_tree: InTree,
}

/// A query resolved against the state: everything the per-anchor work shares.
pub(super) struct Prepared<'s, 'q> {
    /// The view.
    pub state: &'s State,
    /// The query.
    pub query: &'q CandidateQuery,
    /// Distinct requested resource classes; groups refer to them by index, so the
    /// search never looks at a class's name.
    pub classes: Vec<&'q ResourceClass>,
    /// Whether some requested class is text that names none (no provider has it, so
    /// nothing matches; the names are checked before a search, so only a search
    /// made without that check sees one).
    unnamed_class: bool,
    /// The groups, in request order.
    pub groups: Vec<Group<'q>>,
    /// The `same_subtree` sets, as group indices.
    pub same_subtrees: Vec<Vec<usize>>,
    /// Whether a candidate may not use two providers of one tree (microversions
    /// before 1.29 in a cloud that has trees).
    pub one_provider_per_tree: bool,
    /// Sharing providers, and by aggregate: shared with [`Prepared::with_extra`]'s
    /// copies.
    sharing: std::sync::Arc<Sharing>,
    /// Usage counted on top of the view's (see [`Extra`]).
    extra: Option<&'s Extra>,
}

/// Usage counted on top of the view's, by provider and requested class (its index
/// in [`Prepared::classes`]): what headroom's earlier picks took, kept beside the
/// view instead of written into a copy of it as claims, which would cost a claim
/// record and a pending entry per pick on every sharing provider.
pub(super) type Extra = HashMap<(ProviderId, usize), u64, BuildHasherDefault<IdHasher>>;

/// Hashes keys made of internal ids, which no client chooses: a multiply per word
/// (SipHash, the default, is for keys a client could pick to collide, and cost
/// headroom a tenth of its time).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// The sharing providers of a state.
struct Sharing {
    /// Every one, sorted (few: searched by halves, not hashed).
    ids: Vec<ProviderId>,
    /// By aggregate, sorted by aggregate.
    by_aggregate: Vec<(Uuid, Vec<ProviderId>)>,
}

/// One decision of a candidate: which provider supplies a group (suffixed groups) or
/// one class of the unsuffixed group.
#[derive(Debug, Clone)]
pub(super) struct Slot {
    /// The group it belongs to.
    pub group: usize,
    /// What the chosen provider gives: `(class index, amount)`.
    pub demands: Vec<(usize, u64)>,
    /// Whether the group is suffixed (isolation applies to these).
    pub granular: bool,
    /// The providers that may be chosen, as indices into [`AnchorSlots::providers`].
    pub options: Vec<usize>,
}

/// What one provider has of one requested class, looked up once per anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Capacity {
    /// [`Inventory::capacity`] minus what is used, saturated into `i64`;
    /// `i64::MIN` without an inventory of the class.
    ///
    /// [`Inventory::capacity`]: crate::model::Inventory::capacity
    pub free: i64,
    /// The inventory's limits on one allocation.
    pub units: Units,
}

impl Capacity {
    /// No inventory of the class: no amount fits (`min_unit` above `max_unit`).
    const NONE: Capacity = Capacity {
        free: i64::MIN,
        units: Units {
            min_unit: u64::MAX,
            max_unit: 0,
            step_size: NonZeroU64::MIN,
        },
    };

    /// Whether one more allocation of `amount` fits (Placement's per-class test:
    /// room, then [`Units::admits`]).
    pub fn admits(&self, amount: u64) -> bool {
        i128::from(amount) <= i128::from(self.free) && self.units.admits(amount).is_ok()
    }
}

/// The slots of one anchor and the providers they may use.
pub(super) struct AnchorSlots<'s> {
    /// The slots.
    pub slots: Vec<Slot>,
    /// The providers of the anchor's tree, then the sharing providers tied to it.
    pub providers: Vec<&'s Provider>,
    /// What each provider has of each requested class: `capacity[p * classes + k]`.
    pub capacity: Vec<Capacity>,
}

impl<'s, 'q> Prepared<'s, 'q> {
    /// Resolves a query. Names are not checked here (see `super::validate`); an
    /// unknown class simply has no provider with room for it.
    pub fn new(state: &'s State, query: &'q CandidateQuery) -> Self {
        let mut classes: Vec<&'q ResourceClass> = Vec::new();
        let mut unnamed_class = false;
        let mut groups = Vec::with_capacity(query.groups.len());
        for request in &query.groups {
            let demands = request
                .resources
                .iter()
                .filter_map(|(class, amount)| {
                    let Some(class) = class.name() else {
                        unnamed_class = true;
                        return None;
                    };
                    let index = match classes.iter().position(|c| *c == class) {
                        Some(i) => i,
                        None => {
                            classes.push(class);
                            classes.len() - 1
                        }
                    };
                    Some((index, *amount))
                })
                .collect();
            let in_tree = match &request.in_tree {
                None => InTree::Anywhere,
                Some(provider) => match state.provider_by_ref(provider) {
                    Some(p) => InTree::Root(p.row.root),
                    None => InTree::Missing,
                },
            };
            groups.push(Group {
                request,
                granular: !request.suffix.is_empty(),
                demands,
                in_tree,
            });
        }
        let same_subtrees = query
            .same_subtrees
            .iter()
            .map(|set| {
                set.iter()
                    .filter_map(|s| groups.iter().position(|g| g.request.suffix == *s))
                    .collect()
            })
            .collect();
        let one_provider_per_tree =
            !query.nested_aware && state.providers().any(|p| p.row.parent.is_some());

        let mut sharing = Vec::new();
        let mut sharing_by_aggregate: Vec<(Uuid, Vec<ProviderId>)> = Vec::new();
        for p in state.sharing_providers() {
            sharing.push(p.id());
            for agg in &p.aggregates {
                match sharing_by_aggregate.binary_search_by_key(agg, |(a, _)| *a) {
                    Ok(at) => sharing_by_aggregate[at].1.push(p.id()),
                    Err(at) => sharing_by_aggregate.insert(at, (*agg, vec![p.id()])),
                }
            }
        }
        sharing.sort_unstable();
        Prepared {
            state,
            query,
            classes,
            unnamed_class,
            groups,
            same_subtrees,
            one_provider_per_tree,
            sharing: std::sync::Arc::new(Sharing {
                ids: sharing,
                by_aggregate: sharing_by_aggregate,
            }),
            extra: None,
        }
    }

    /// The same question with `extra` used on top of the view: what headroom asks
    /// after each pick it counts, without resolving the query again.
    pub fn with_extra<'t>(&self, extra: &'t Extra) -> Prepared<'t, 'q>
    where
        's: 't,
    {
        Prepared {
            state: self.state,
            query: self.query,
            classes: self.classes.clone(),
            unnamed_class: self.unnamed_class,
            groups: self.groups.clone(),
            same_subtrees: self.same_subtrees.clone(),
            one_provider_per_tree: self.one_provider_per_tree,
            sharing: self.sharing.clone(),
            extra: Some(extra),
        }
    }

    /// How much of requested class `k` is taken on `p`: the view's usage (pending
    /// claims counted) and any [`Extra`].
    pub fn used(&self, p: &Provider, k: usize) -> u64 {
        let extra = self.extra.and_then(|e| e.get(&(p.id(), k))).copied();
        p.used(self.classes[k].as_str(), self.query.now)
            .saturating_add(extra.unwrap_or(0))
    }

    /// Whether a provider shares its inventory through aggregates.
    pub fn is_sharing(&self, id: ProviderId) -> bool {
        self.sharing.ids.binary_search(&id).is_ok()
    }

    /// Whether some group can never match anything, whatever the anchor (or there is
    /// no group with resources, which the API never sends).
    pub fn hopeless(&self) -> bool {
        self.unnamed_class
            || self.groups.iter().all(|g| g.demands.is_empty())
            || self.groups.iter().any(|g| {
                g.in_tree == InTree::Missing
                    || (g.demands.is_empty()
                        && g.request.required.is_empty()
                        && g.request.member_of.is_empty())
            })
    }

    /// The anchors worth visiting, in creation order, lazily: every root, or only one
    /// when the unsuffixed group is pinned to a tree (it cannot use sharing providers
    /// then).
    pub fn anchors(&self) -> Box<dyn Iterator<Item = &'s Provider> + 's> {
        match self.pinned() {
            Some(root) => Box::new(self.state.provider(root).into_iter()),
            None => Box::new(self.state.providers().filter(|p| p.row.parent.is_none())),
        }
    }

    /// The one root the unsuffixed group is pinned to by `in_tree`, if it is.
    pub fn pinned(&self) -> Option<ProviderId> {
        self.groups.iter().find_map(|g| match g.in_tree {
            InTree::Root(root) if !g.granular && !g.demands.is_empty() => Some(root),
            _ => None,
        })
    }

    /// Whether a root passes `root_required`.
    pub fn root_allowed(&self, root: &Provider) -> bool {
        self.query.root_required.iter().all(|t| has_trait(root, t))
            && !self.query.root_forbidden.iter().any(|t| has_trait(root, t))
    }

    /// What `p` has of each requested class.
    fn capacities(&self, p: &Provider, out: &mut Vec<Capacity>) {
        for (k, class) in self.classes.iter().enumerate() {
            out.push(match p.inventories.get(*class) {
                None => Capacity::NONE,
                Some(inv) => {
                    // Saturated into i64, the width the search works in.
                    let capacity = inv.capacity().clamp(i64::MIN.into(), i64::MAX.into()) as i64;
                    let used = self.used(p, k);
                    Capacity {
                        free: capacity.saturating_sub(i64::try_from(used).unwrap_or(i64::MAX)),
                        units: inv.units(),
                    }
                }
            });
        }
    }

    /// The slots of a candidate anchored at `anchor`, each with its providers, or None
    /// when some slot has no provider there (no candidate is anchored here).
    pub fn slots_at(&self, anchor: &'s Provider) -> Option<AnchorSlots<'s>> {
        if !self.root_allowed(anchor) {
            return None;
        }
        let (providers, in_tree) = self.anchor_providers(anchor);
        let width = self.classes.len();
        let mut capacity = Vec::with_capacity(providers.len() * width);
        for p in &providers {
            self.capacities(p, &mut capacity);
        }
        let admits =
            |i: usize, class: usize, amount: u64| capacity[i * width + class].admits(amount);

        let mut slots = Vec::new();
        for (gi, g) in self.groups.iter().enumerate() {
            let req = g.request;
            if g.granular {
                // A provider of the anchor's tree, or a sharing provider tied to it.
                let options: Vec<usize> = (0..providers.len())
                    .filter(|&i| {
                        g.demands.iter().all(|&(k, a)| admits(i, k, a))
                            && self.serves_whole_group(g, providers[i])
                    })
                    .collect();
                if options.is_empty() {
                    return None;
                }
                slots.push(Slot {
                    group: gi,
                    demands: g.demands.clone(),
                    granular: true,
                    options,
                });
                continue;
            }
            // The unsuffixed group: one slot per class.
            let anchor_in_aggs = in_all(anchor, &req.member_of);
            if in_any(anchor, &req.forbidden_aggregates) {
                return None;
            }
            let in_tree_ok = match g.in_tree {
                InTree::Anywhere => true,
                InTree::Root(root) => root == anchor.id(),
                InTree::Missing => false,
            };
            if !in_tree_ok {
                return None;
            }
            for &(class, amount) in &g.demands {
                let usable = |i: usize| {
                    let p = providers[i];
                    // Sharing providers of other trees only when not pinned to a tree.
                    let own_tree = i < in_tree;
                    (own_tree || g.in_tree == InTree::Anywhere)
                        && admits(i, class, amount)
                        && !req.forbidden.iter().any(|t| has_trait(p, t))
                        && !in_any(p, &req.forbidden_aggregates)
                        && (req.member_of.is_empty()
                            || in_all(p, &req.member_of)
                            || (own_tree && anchor_in_aggs))
                };
                let options: Vec<usize> = (0..providers.len()).filter(|&i| usable(i)).collect();
                if options.is_empty() {
                    return None;
                }
                slots.push(Slot {
                    group: gi,
                    demands: vec![(class, amount)],
                    granular: false,
                    options,
                });
            }
        }
        Some(AnchorSlots {
            slots,
            providers,
            capacity,
        })
    }

    /// The providers a candidate anchored at `anchor` may use: those of its tree, in
    /// id order, then the sharing providers tied to it; and how many are of the tree.
    pub fn anchor_providers(&self, anchor: &'s Provider) -> (Vec<&'s Provider>, usize) {
        let mut providers = Vec::new();
        let in_tree = self.anchor_providers_into(anchor, &mut providers, &mut Vec::new());
        (providers, in_tree)
    }

    /// [`Prepared::anchor_providers`] into `out` (emptied first), with `ids` to work
    /// in: for callers that visit many anchors and keep their buffers.
    pub fn anchor_providers_into(
        &self,
        anchor: &'s Provider,
        out: &mut Vec<&'s Provider>,
        ids: &mut Vec<ProviderId>,
    ) -> usize {
        let state = self.state;
        out.clear();
        if anchor.children.is_empty() {
            out.push(anchor);
        } else {
            out.extend(
                state
                    .subtree(anchor.id())
                    .into_iter()
                    .filter_map(|id| state.provider(id)),
            );
        }
        let in_tree = out.len();
        // The sharing providers outside the tree that share an aggregate with a
        // provider of it, in id order.
        if !self.sharing.by_aggregate.is_empty() {
            ids.clear();
            for p in &out[..in_tree] {
                for agg in &p.aggregates {
                    // As numbers: the same order as the bytes', compared at once
                    // rather than byte by byte (every anchor of every query).
                    if let Ok(at) = self
                        .sharing
                        .by_aggregate
                        .binary_search_by_key(&agg.as_u128(), |(a, _)| a.as_u128())
                    {
                        ids.extend(self.sharing.by_aggregate[at].1.iter().copied());
                    }
                }
            }
            ids.sort_unstable();
            ids.dedup();
            out.extend(
                ids.iter()
                    .filter_map(|id| state.provider(*id))
                    .filter(|p| p.row.root != anchor.id()),
            );
        }
        in_tree
    }

    /// Whether some sharing provider has an inventory of requested class `k`.
    pub fn shared_class(&self, k: usize) -> bool {
        self.sharing.ids.iter().any(|id| {
            self.state
                .provider(*id)
                .is_some_and(|p| p.inventories.contains_key(self.classes[k].as_str()))
        })
    }

    /// Whether `p` can serve the whole of suffixed group `g` (the anchor and
    /// capacity aside).
    pub fn serves_whole_group(&self, g: &Group<'_>, p: &Provider) -> bool {
        let req = g.request;
        if !g.demands.is_empty() {
            match g.in_tree {
                InTree::Anywhere => {}
                InTree::Root(root) if p.row.root == root => {}
                _ => return false,
            }
        } else if req.required.is_empty() && req.member_of.is_empty() {
            // A group with neither resources, traits nor aggregates selects nothing
            // (Placement's behaviour; such a group is only legal with same_subtree).
            return false;
        }
        has_traits(p, &req.required)
            && !req.forbidden.iter().any(|t| has_trait(p, t))
            && in_all(p, &req.member_of)
            && !in_any(p, &req.forbidden_aggregates)
    }
}

/// Whether `p` has the trait (text that names no trait is a trait no provider has).
pub(super) fn has_trait(p: &Provider, t: &RequestedName<TraitName>) -> bool {
    t.name().is_some_and(|t| p.traits.contains(t))
}

/// Whether `p` has at least one trait of every any-of set.
pub(super) fn has_traits(p: &Provider, required: &[Vec<RequestedName<TraitName>>]) -> bool {
    required
        .iter()
        .all(|any| any.iter().any(|t| has_trait(p, t)))
}

/// Whether `p` is in at least one aggregate of every any-of set.
pub(super) fn in_all(p: &Provider, member_of: &[Vec<Uuid>]) -> bool {
    member_of
        .iter()
        .all(|any| any.iter().any(|a| p.aggregates.contains(a)))
}

/// Whether `p` is in any of the aggregates.
pub(super) fn in_any(p: &Provider, aggregates: &[Uuid]) -> bool {
    aggregates.iter().any(|a| p.aggregates.contains(a))
}
