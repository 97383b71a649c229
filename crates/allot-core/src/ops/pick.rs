//! Pick-and-claim (allot's extension, issue 24): the server chooses where a claim goes.
//!
//! A pick is a candidate query (`GET /allocation_candidates`'s, weighing included) and
//! the claims to place with it, one per instance. Planned in the writer like every
//! write, against the view it will apply to: the search, the choice and the claim are
//! one step, so two schedulers never choose the same last unit and nobody retries.
//!
//! Each instance takes the first candidate of the query's order (the search's, or the
//! weighed one) that its affinity rule admits, on the view as the instances placed
//! before it left it:
//! - [`Affinity::None`]: any candidate;
//! - [`Affinity::DifferentRoots`]: a root no earlier instance of the pick uses (an
//!   anti-affinity group);
//! - [`Affinity::SameRoot`]: the root of the others (an affinity group). The root is
//!   chosen as the first, in the query's order, that holds the whole group; if none
//!   does, the one that holds the most.
//!
//! A candidate's root is the root of the providers it uses that do not share through
//! aggregates (a sharing provider serves many trees); a candidate of sharing providers
//! alone has no root, and no affinity rule holds it back, but it is found only through
//! an anchor the rule lets the search visit (the roots taken are not searched again).
//!
//! `partial: false` places all the instances or none (a refusal names how many do not
//! fit); `partial: true` places as many as fit and names the others.

use std::collections::BTreeSet;

use uuid::Uuid;

use super::allocations::Requested;
use super::claims::NewClaim;
use super::server_groups::Guard;
use super::Plan;
use crate::candidates::{Admit, AllocationRequest, CandidateQuery, SearchOptions};
use crate::change::Change;
use crate::error::{ConflictCode, Error};
use crate::model::{Claim, ProviderId, Timestamp};
use crate::names::{RequestedName, SHARING_TRAIT};
use crate::state::State;

/// The affinity rule of a pick's instances.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Affinity {
    /// Wherever each fits.
    #[default]
    None,
    /// Each on a root of its own.
    DifferentRoots,
    /// All on one root.
    SameRoot,
}

/// A pick: where the claims may go, and the claims.
#[derive(Debug, Clone)]
pub struct Pick {
    /// The candidate query (its `limit` is ignored; its `now` is the plan's).
    pub query: CandidateQuery,
    /// How the search runs.
    pub options: SearchOptions,
    /// One claim per instance, in the order they are placed; their `allocations` are
    /// what the pick chooses (any given are ignored).
    pub claims: Vec<NewClaim>,
    /// The instances' affinity rule.
    pub affinity: Affinity,
    /// Whether some instances may stay unplaced.
    pub partial: bool,
    /// What instances ask of their own, by the place of their claim in `claims`
    /// (a mass start of mixed shapes, a drain); an instance past its end asks
    /// nothing of its own.
    pub shapes: Vec<Shape>,
    /// Whether the instances move as one (a drain): a consumer the pick has not
    /// placed yet counts nowhere for its groups' rules, which the caller checks
    /// once all are placed.
    pub together: bool,
}

/// What one instance of a pick asks of its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shape {
    /// Its query (None: the pick's).
    pub query: Option<CandidateQuery>,
    /// Sharing providers its root must reach through an aggregate: a drain's
    /// consumer keeps what it holds there.
    pub reach: Vec<ProviderId>,
}

/// What a pick placed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placed {
    /// The claims made, in the pick's order.
    pub claims: Vec<Claim>,
    /// The consumers of the instances that did not fit (with `partial`).
    pub unplaced: Vec<Uuid>,
    /// The instances placed against a soft rule of a server group, because no
    /// root that keeps it fits: (consumer, group).
    pub soft_broken: Vec<(Uuid, Uuid)>,
}

impl State {
    /// Plans a pick (see the module doc): every claim it makes, in one plan.
    pub fn plan_pick(&self, pick: Pick, now: Timestamp) -> Plan<Placed> {
        let (affinity, partial, total) = (pick.affinity, pick.partial, pick.claims.len());
        let outcome = self.place_all(pick, now)?;
        let placed = outcome.placed.claims.len();
        if placed == 0 || (!partial && placed < total) {
            let rule = match affinity {
                Affinity::None => "",
                Affinity::DifferentRoots => " each on a root of its own",
                Affinity::SameRoot => " on one root",
            };
            return Err(Error::conflict(
                ConflictCode::ClaimDoesNotFit,
                if total == 1 {
                    "No allocation candidate fits the request: nothing was claimed.".to_owned()
                } else {
                    format!(
                        "Only {placed} of {total} instances fit the request{rule}: nothing \
                         was claimed."
                    )
                },
            ));
        }
        Ok((outcome.placed, outcome.changes))
    }

    /// Places what fits of a pick, refusing nothing for what does not (a drain
    /// names its consumers left over).
    pub(crate) fn place_all(&self, mut pick: Pick, now: Timestamp) -> crate::Result<Outcome> {
        let at_now = |query: &mut CandidateQuery| {
            query.now = now;
            query.limit = Some(1);
        };
        let mut query = pick.query.clone();
        at_now(&mut query);
        pick.shapes
            .iter_mut()
            .filter_map(|s| s.query.as_mut())
            .for_each(at_now);
        match pick.affinity {
            Affinity::SameRoot => self.place_on_one_root(&pick, &query, now),
            affinity => self.place_each(&pick, &query, affinity, None, now),
        }
    }

    /// Places the instances one after another, each on the first candidate its
    /// affinity admits (`only`: on that root alone).
    fn place_each(
        &self,
        pick: &Pick,
        query: &CandidateQuery,
        affinity: Affinity,
        only: Option<ProviderId>,
        now: Timestamp,
    ) -> crate::Result<Outcome> {
        let mut scratch = self.clone();
        let mut out = Outcome::default();
        let mut roots: BTreeSet<ProviderId> = BTreeSet::new();
        // In the search's own order, the next instance's candidate is anchored no
        // earlier than the last one's: the anchors before it had nothing to admit,
        // and the instances placed since only took more and kept more roots out. So
        // they are not searched again (a mass start stays linear in its instances).
        // Each shape keeps its own floor: a smaller one may fit where a larger did
        // not, but what instances of other shapes took only keeps more out.
        let in_order = pick.options.random_seed.is_none();
        let mut floors: Vec<(&CandidateQuery, ProviderId)> = Vec::new();
        for (i, claim) in pick.claims.iter().enumerate() {
            let shape = pick.shapes.get(i);
            let query = shape.and_then(|s| s.query.as_ref()).unwrap_or(query);
            let in_order = in_order && !query.weigh.is_set();
            let floor = floors
                .iter()
                .find(|(shape, _)| *shape == query)
                .map_or(ProviderId(0), |&(_, floor)| floor);
            let guard = guard_of(&scratch, pick, i, now);
            let so_far = SoFar {
                affinity,
                only,
                floor,
                roots: &roots,
                reach: shape.map_or(&[], |s| &s.reach[..]),
            };
            let search = |soft: bool| search(&scratch, pick, query, &so_far, &guard, soft);
            // Soft rules first: the roots that keep them, else any the hard ones
            // admit.
            let mut found = search(true)?;
            let mut soft_broken = false;
            if found.requests.is_empty() && !guard.soft.is_empty() {
                found = search(false)?;
                soft_broken = true;
            }
            let Some(chosen) = found.requests.first() else {
                out.placed.unplaced.push(claim.consumer);
                continue;
            };
            let allocations = requested(&scratch, &found, chosen);
            let chosen_root = root_of(&scratch, chosen);
            if soft_broken {
                let root = chosen_root.and_then(|r| scratch.provider(r));
                out.placed.soft_broken.extend(
                    guard
                        .soft
                        .iter()
                        .filter(|c| root.is_some_and(|r| c.breaks(r)))
                        .map(|c| (claim.consumer, c.group)),
                );
            }
            if let Some(root) = chosen_root {
                roots.insert(root);
                if in_order && guard.is_empty() {
                    // A candidate's root, when it has one, is its anchor. (Not
                    // past the anchors a group kept out: another instance's
                    // groups may admit them.)
                    match floors.iter_mut().find(|(shape, _)| *shape == query) {
                        Some((_, floor)) => *floor = root,
                        None => floors.push((query, root)),
                    }
                }
            }
            let (made, changes) = scratch.plan_claim_unkept(
                NewClaim {
                    allocations,
                    ..claim.clone()
                },
                now,
            )?;
            scratch.apply(&changes);
            if !pick.together {
                // (Together, the instances after it count nowhere yet: the
                // caller checks the groups once all are placed.)
                guard.confirm(&scratch, &claim.consumer, now)?;
            }
            out.changes.extend(changes);
            out.placed.claims.push(made);
        }
        Ok(out)
    }

    /// [`Affinity::SameRoot`]: the first root, in the query's order, that holds every
    /// instance, else the one that holds the most.
    fn place_on_one_root(
        &self,
        pick: &Pick,
        query: &CandidateQuery,
        now: Timestamp,
    ) -> crate::Result<Outcome> {
        let mut everywhere = query.clone();
        everywhere.limit = None;
        let found = self.allocation_candidates(&everywhere, &pick.options)?;
        let mut tried: BTreeSet<ProviderId> = BTreeSet::new();
        let mut best: Option<Outcome> = None;
        for candidate in &found.requests {
            let Some(root) = root_of(self, candidate) else {
                continue;
            };
            if !tried.insert(root) {
                continue;
            }
            let outcome = self.place_each(pick, query, Affinity::SameRoot, Some(root), now)?;
            if outcome.placed.unplaced.is_empty() {
                return Ok(outcome);
            }
            if best
                .as_ref()
                .is_none_or(|b| outcome.placed.claims.len() > b.placed.claims.len())
            {
                best = Some(outcome);
            }
        }
        Ok(best.unwrap_or_else(|| Outcome {
            placed: Placed {
                unplaced: pick.claims.iter().map(|c| c.consumer).collect(),
                ..Placed::default()
            },
            changes: Vec::new(),
        }))
    }
}

/// The server groups' checks for instance `i` of `pick` on `view`: with `together`,
/// the instances after it count nowhere yet.
fn guard_of(view: &State, pick: &Pick, i: usize, now: Timestamp) -> Guard {
    if !view.has_server_groups() {
        return Guard::default();
    }
    let later: Vec<Uuid> = match pick.together {
        true => pick.claims[i + 1..].iter().map(|c| c.consumer).collect(),
        false => Vec::new(),
    };
    let claim = &pick.claims[i];
    Guard::new(view, &claim.consumer, claim.server_group, &later, now)
}

/// A candidate's amounts, as a claim asks for them.
fn requested(
    view: &State,
    found: &crate::candidates::Candidates,
    chosen: &AllocationRequest,
) -> Vec<Requested> {
    chosen
        .allocations
        .iter()
        .filter_map(|&(id, k, amount)| {
            Some(Requested {
                provider: view.provider(id)?.uuid().into(),
                class: RequestedName::Name(found.classes[k].clone()),
                used: amount,
            })
        })
        .collect()
}

/// What the pick's own rule keeps out of the next instance's search, so far.
struct SoFar<'a> {
    affinity: Affinity,
    /// The one root it may use.
    only: Option<ProviderId>,
    /// The first anchor worth searching (see `place_each`).
    floor: ProviderId,
    /// The roots the instances before it took.
    roots: &'a BTreeSet<ProviderId>,
    /// The sharing providers the instance's root must reach.
    reach: &'a [ProviderId],
}

impl SoFar<'_> {
    /// Whether the rule admits a candidate on `root` (None: on sharing providers
    /// alone), or an anchor that is `root` (`anchor`).
    fn admits(&self, view: &State, root: Option<ProviderId>, anchor: bool) -> bool {
        if let Some(root) = root {
            // Drained roots take nothing new; a drain's consumer must reach its pools.
            if view.is_drained(root) || !self.reach.iter().all(|&s| view.reaches(root, s)) {
                return false;
            }
        }
        match (self.affinity, self.only) {
            (_, Some(only)) => root == Some(only),
            _ if anchor && root.is_some_and(|a| a < self.floor) => false,
            (Affinity::DifferentRoots, None) => root.is_none_or(|r| !self.roots.contains(&r)),
            _ => true,
        }
    }
}

/// The candidates of one instance, on `view`: those its pick's rule admits, and
/// its server groups' (hard ones always, soft ones too with `soft`).
fn search(
    view: &State,
    pick: &Pick,
    query: &CandidateQuery,
    so_far: &SoFar<'_>,
    guard: &Guard,
    soft: bool,
) -> crate::Result<crate::candidates::Candidates> {
    let kept = |root: ProviderId| {
        let Some(root) = view.provider(root) else {
            return true;
        };
        let soft = if soft { &guard.soft[..] } else { &[] };
        !guard
            .hard
            .iter()
            .chain(soft)
            .any(|check| check.breaks(root))
    };
    // The roots the rule keeps out are not searched at all; the candidates found
    // are checked too, as one anchored elsewhere may stand on such a root.
    let anchor =
        |a: ProviderId| so_far.admits(view, Some(a), true) && (guard.is_empty() || kept(a));
    let candidate = |c: &AllocationRequest| {
        let root = root_of(view, c);
        so_far.admits(view, root, false) && (guard.is_empty() || root.is_none_or(kept))
    };
    let admit = Admit {
        anchor: &anchor,
        candidate: &candidate,
    };
    match so_far.only {
        // One root: the walk computes that root's bound alone.
        Some(_) => view.candidates_admitted(query, &pick.options, &admit),
        None => view.candidates_for_pick(query, &pick.options, &admit),
    }
}

/// What placing some instances made.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// The claims made and the instances left.
    pub placed: Placed,
    /// The changes.
    pub changes: Vec<Change>,
}

/// The root a candidate stands on: that of its providers that do not share through
/// aggregates (the smallest, should there be several).
fn root_of(state: &State, candidate: &AllocationRequest) -> Option<ProviderId> {
    candidate
        .allocations
        .iter()
        .map(|a| a.0)
        .chain(candidate.mappings.iter().flatten().copied())
        .filter_map(|id| state.provider(id))
        .filter(|p| !p.traits.contains(SHARING_TRAIT))
        .map(|p| p.row.root)
        .min()
}

#[cfg(test)]
mod tests;
