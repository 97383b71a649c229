//! The order in which a request's names are checked.
//!
//! Placement checks names while it searches, group by group: the anchor traits of
//! `root_required` first (and stops with an empty answer if no root has them), then
//! for each group its resource classes, whether any provider is in its aggregates,
//! its required and forbidden traits, whether its `in_tree` provider exists, whether
//! any provider has room for each class, and whether the group alone has any
//! candidate; the first step that finds nothing ends the request with an empty answer
//! before later names are looked at. So `resources1=VCPU:100000&resources2=NOPE:1`
//! is an empty answer, not an error.
//!
//! The search itself does not need that order. So names are checked first, cheaply;
//! only when one is unknown are the "nothing matches" steps before it evaluated, to
//! decide between the error and an empty answer.

use crate::error::Error;
use crate::names::{RequestedName, ResourceClass, TraitName};
use crate::state::State;

use super::filter::{has_trait, in_all, Prepared};
use super::{CandidateQuery, RequestGroup, Weigh};

/// Why a request gets no search.
pub(super) enum Refusal {
    /// An earlier step matched nothing: the answer is empty.
    Empty,
    /// A name is unknown.
    Error(Error),
}

/// Where in Placement's order a name was found unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Classes,
    Required,
    Forbidden,
}

/// The request's first unknown name, if any, resolved against the steps before it.
pub(super) fn first_refusal(state: &State, query: &CandidateQuery) -> Option<Refusal> {
    // Text that is no name names nothing, like a name the state does not have.
    let known_trait =
        |t: &RequestedName<TraitName>| t.name().is_some_and(|t| state.trait_exists(t));
    let known_class =
        |c: &RequestedName<ResourceClass>| c.name().is_some_and(|c| state.class_exists(c));
    let unknown_trait =
        |name: &RequestedName<TraitName>| Error::invalid(format!("No such trait(s): {name}."));
    for name in query.root_required.iter().chain(&query.root_forbidden) {
        if !known_trait(name) {
            return Some(Refusal::Error(unknown_trait(name)));
        }
    }
    let (at, stage, error) = query.groups.iter().enumerate().find_map(|(i, g)| {
        if let Some((class, _)) = g.resources.iter().find(|(c, _)| !known_class(c)) {
            return Some((
                i,
                Stage::Classes,
                Error::invalid(format!(
                    "Invalid resource class in resources parameter: No such resource class \
                     {class}."
                )),
            ));
        }
        if let Some(t) = g.required.iter().flatten().find(|t| !known_trait(t)) {
            return Some((i, Stage::Required, unknown_trait(t)));
        }
        if let Some(t) = g.forbidden.iter().find(|t| !known_trait(t)) {
            return Some((i, Stage::Forbidden, unknown_trait(t)));
        }
        None
    })?;

    let root_filtered = !query.root_required.is_empty() || !query.root_forbidden.is_empty();
    if root_filtered
        && !state.providers().any(|p| {
            p.row.parent.is_none()
                && query.root_required.iter().all(|t| has_trait(p, t))
                && !query.root_forbidden.iter().any(|t| has_trait(p, t))
        })
    {
        return Some(Refusal::Empty);
    }
    for g in &query.groups[..at] {
        if group_matches_nothing(state, query, g) {
            return Some(Refusal::Empty);
        }
    }
    if stage > Stage::Classes && no_member(state, &query.groups[at]) {
        return Some(Refusal::Empty);
    }
    Some(Refusal::Error(error))
}

/// Whether `member_of` is given and no provider is in its aggregates.
fn no_member(state: &State, g: &RequestGroup) -> bool {
    !g.member_of.is_empty() && !state.providers().any(|p| in_all(p, &g.member_of))
}

/// Whether one group, alone, has no candidate (each "nothing matches" step of
/// Placement's order for a group whose names are known).
fn group_matches_nothing(state: &State, query: &CandidateQuery, g: &RequestGroup) -> bool {
    if no_member(state, g) {
        return true;
    }
    let tree = match &g.in_tree {
        None => None,
        Some(provider) => match state.provider_by_ref(provider) {
            Some(p) => Some(p.row.root),
            None => return true,
        },
    };
    for (class, amount) in &g.resources {
        // The names of the groups before the first unknown one are all known.
        let Some(class) = class.name() else {
            return true;
        };
        let room = state.providers().any(|p| {
            tree.is_none_or(|root| p.row.root == root)
                && state.has_room(p, class, *amount, query.now)
        });
        if !room {
            return true;
        }
    }
    let alone = CandidateQuery {
        groups: vec![g.clone()],
        isolate: false,
        limit: Some(1),
        root_required: query.root_required.clone(),
        root_forbidden: query.root_forbidden.clone(),
        same_subtrees: Vec::new(),
        nested_aware: true,
        now: query.now,
        weigh: Weigh::default(),
    };
    if g.resources.is_empty() {
        // A resourceless group (legal only with same_subtree) matches the providers
        // that have its traits and aggregates, under a root that passes
        // `root_required` (or sharing with one); `in_tree` is ignored. The search
        // would call a query of it alone hopeless, so look at the providers directly.
        let prep = Prepared::new(state, &alone);
        return !prep.anchors().any(|anchor| prep.slots_at(anchor).is_some());
    }
    !state.any_candidate(&alone)
}
