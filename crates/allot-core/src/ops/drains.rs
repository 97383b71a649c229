//! Draining hosts (issue 44): every consumer of some roots placed elsewhere as one
//! plan, each target held by a pending claim, every server group's rule kept.
//!
//! - **made** ([`State::plan_drain`]): the roots are marked drained first (they take
//!   nothing new from allot while the drain is open), then each consumer holding
//!   allocations in their trees is placed as one instance of a mass start of mixed
//!   shapes: what it holds on each provider of the drained trees becomes a request
//!   group of its own (so the tree's structure is kept: VCPU on a root and a VF on a
//!   NIC need the same of one provider each on the target), the traits the caller
//!   names are required of the target root, and what it holds elsewhere (a sharing
//!   pool, another tree) stays where it is: the target root must reach those pools.
//!   The consumer keeps its source allocations; its claim names only what it adds
//!   on the target, and confirming it replaces what the consumer holds in the
//!   drained trees alone (`State::plan_confirm_claim`). Members moving, staying or
//!   elsewhere are kept to their groups' rules by the pick's own check.
//! - **confirmed** ([`State::plan_confirm_drain`]): every claim still pending
//!   confirmed in one write; the roots stay out (the hosts are in maintenance).
//! - **deleted** ([`State::plan_abandon_drain`]): every claim still pending
//!   released (an open drain is abandoned), the roots open again, the record
//!   forgotten.
//!
//! `COMPUTE_STATUS_DISABLED` is set on the roots that lack it when asked, and taken
//! off those again when the drain is deleted.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::claims::NewClaim;
use super::pick::{Affinity, Pick, Shape};
use super::server_groups::Enforced;
use super::{bump, Plan};
use crate::candidates::{CandidateQuery, RequestGroup, SearchOptions, Weigh};
use crate::change::Change;
use crate::drains::{Drain, DrainClaim, DrainState};
use crate::error::{ConflictCode, Error};
use crate::model::{Claim, ProviderId, Timestamp};
use crate::names::{RequestedName, ResourceClass, TraitName, SHARING_TRAIT};
use crate::state::State;

/// The trait Nova's scheduler reads as "this compute service is disabled".
pub const DISABLED_TRAIT: &str = "COMPUTE_STATUS_DISABLED";

/// A drain as a request asks for it, checked for form at the edge.
#[derive(Debug, Clone)]
pub struct NewDrain {
    /// Its uuid.
    pub uuid: Uuid,
    /// The roots to drain.
    pub roots: Vec<Uuid>,
    /// Only these consumers (None: every consumer holding allocations there).
    pub consumers: Option<Vec<Uuid>>,
    /// A consumer's own query instead of the one derived from what it holds.
    pub requests: BTreeMap<Uuid, CandidateQuery>,
    /// Traits every target root must have.
    pub required: Vec<TraitName>,
    /// Whether some consumers may stay unplaced.
    pub partial: bool,
    /// How targets are ordered.
    pub weigh: Weigh,
    /// When the claims stop counting (None: never; a drain can take hours).
    pub expires_at: Option<Timestamp>,
    /// Whether to set `COMPUTE_STATUS_DISABLED` on the roots.
    pub disable: bool,
    /// How the search runs.
    pub options: SearchOptions,
}

/// What a drain made.
#[derive(Debug, Clone, PartialEq)]
pub struct Drained {
    /// Its record.
    pub drain: Drain,
    /// The claims made, in placing order.
    pub claims: Vec<Claim>,
    /// The consumers left, each with why.
    pub unplaced: Vec<(Uuid, String)>,
}

fn unknown_drain(uuid: &Uuid) -> Error {
    Error::not_found(format!("No drain with uuid {uuid} found."))
}

impl State {
    /// Plans a drain (see the module doc). `claim_uuid` draws each claim's uuid.
    pub fn plan_drain(
        &self,
        new: NewDrain,
        claim_uuid: &mut dyn FnMut() -> Uuid,
        now: Timestamp,
    ) -> Plan<Drained> {
        if self.drain(&new.uuid).is_some() {
            return Err(Error::conflict(
                ConflictCode::Duplicate,
                format!("A drain with uuid {} already exists.", new.uuid),
            ));
        }
        let roots = self.drain_roots(&new.roots, now)?;
        let consumers = self.consumers_in(&roots, new.consumers.as_deref())?;
        let mut drain = Drain {
            uuid: new.uuid,
            roots: roots.iter().map(|&r| self.uuid_of(r)).collect(),
            disabled: Vec::new(),
            claims: Vec::new(),
            state: DrainState::Open,
            created_at: now,
            ended_at: None,
        };
        drain.roots.sort_unstable();
        let mut changes = Vec::new();
        if new.disable {
            changes = self.disable(&roots, &mut drain, now);
        }
        // The roots are drained before anything is placed: no consumer goes back.
        let mut scratch = self.clone();
        scratch.apply(&[Change::PutDrain(Box::new(drain.clone()))]);
        scratch.apply(&changes);
        let (claims, shapes, queries) = self.drain_instances(&new, &roots, &consumers, claim_uuid);
        // (No consumer: nothing is placed, and the roots are drained at once.)
        let pick = Pick {
            query: queries.first().cloned().unwrap_or_default(),
            options: new.options,
            claims,
            affinity: Affinity::None,
            partial: true,
            shapes,
            together: true,
        };
        let outcome = scratch.place_all(pick, now)?;
        // The rules, checked once every consumer is where the drain puts it (an
        // affinity group on a drained root moves whole, broken on the way).
        let mut after = scratch.clone();
        after.apply(&outcome.changes);
        let moved: Vec<Uuid> = outcome.placed.claims.iter().map(|c| c.consumer).collect();
        scratch.groups_kept(&after, &moved, Enforced::Always, now)?;
        let placed = outcome.placed.claims;
        if !new.partial && !outcome.placed.unplaced.is_empty() {
            return Err(Error::conflict(
                ConflictCode::ClaimDoesNotFit,
                format!(
                    "Only {} of {} consumers of the drain fit elsewhere: nothing was claimed.",
                    placed.len(),
                    consumers.len()
                ),
            ));
        }
        // Why, on the view the others left.
        let unplaced = outcome
            .placed
            .unplaced
            .iter()
            .map(|c| {
                (
                    *c,
                    after.why_unplaced(c, &consumers, &queries, &new.options),
                )
            })
            .collect();
        drain.claims = placed
            .iter()
            .map(|c| DrainClaim {
                consumer: c.consumer,
                claim: c.uuid,
            })
            .collect();
        changes.insert(0, Change::PutDrain(Box::new(drain.clone())));
        changes.extend(outcome.changes);
        let drained = Drained {
            drain,
            claims: placed,
            unplaced,
        };
        Ok((drained, changes))
    }

    /// Plans confirming a drain: every claim still pending confirmed (each
    /// replacing what its consumer holds in the drained trees), in one write; the
    /// roots stay out until the drain is deleted. A confirmed drain is left as it is.
    pub fn plan_confirm_drain(&self, uuid: &Uuid, now: Timestamp) -> Plan<Drain> {
        let drain = self.drain(uuid).ok_or_else(|| unknown_drain(uuid))?;
        if drain.state == DrainState::Confirmed {
            return Ok((drain.clone(), Vec::new()));
        }
        let mut scratch = self.clone();
        let mut changes = Vec::new();
        for c in &drain.claims {
            let live = scratch.claim(&c.claim).is_some_and(|c| c.live(now));
            if live {
                let (_, more) = scratch.plan_confirm_claim(&c.claim, true, now)?;
                scratch.apply(&more);
                changes.extend(more);
            }
        }
        let ended = Drain {
            state: DrainState::Confirmed,
            ended_at: Some(now),
            ..drain.clone()
        };
        changes.push(Change::PutDrain(Box::new(ended.clone())));
        Ok((ended, changes))
    }

    /// Plans deleting a drain: its pending claims released (an open drain is
    /// abandoned), its roots open again, the disabled trait taken off, its record
    /// forgotten.
    pub fn plan_abandon_drain(&self, uuid: &Uuid, now: Timestamp) -> Plan<()> {
        let drain = self.drain(uuid).ok_or_else(|| unknown_drain(uuid))?;
        let mut changes = Vec::new();
        for c in &drain.claims {
            if self.claim(&c.claim).is_some_and(|c| c.live(now)) {
                let (_, more) = self.plan_release_claim(&c.claim, now)?;
                changes.extend(more);
            }
        }
        changes.extend(self.enable_again(drain, now));
        changes.push(Change::DeleteDrain(*uuid));
        Ok(((), changes))
    }

    /// The roots a drain names: roots, each once, none already drained or holding
    /// another open drain's targets.
    fn drain_roots(&self, uuids: &[Uuid], now: Timestamp) -> crate::Result<Vec<ProviderId>> {
        if uuids.is_empty() {
            return Err(Error::invalid("A drain needs at least one root."));
        }
        let mut roots = Vec::new();
        for uuid in uuids {
            let p = self.provider_by_uuid(uuid).ok_or_else(|| {
                Error::invalid(format!("No resource provider with uuid {uuid} found."))
            })?;
            if p.row.parent.is_some() {
                return Err(Error::invalid(format!(
                    "Resource provider {uuid} is not a root: a drain takes whole trees."
                )));
            }
            if self.is_drained(p.id()) {
                return Err(Error::conflict(
                    ConflictCode::Other,
                    format!("Resource provider {uuid} is being drained already."),
                ));
            }
            // Consumers another drain is moving here would land on it after both
            // confirm: that drain must end first.
            if let Some(other) = self.drain_targeting(p.id(), now) {
                return Err(Error::conflict(
                    ConflictCode::Other,
                    format!(
                        "Resource provider {uuid} holds targets of drain {other}: confirm or \
                         abandon it first."
                    ),
                ));
            }
            roots.push(p.id());
        }
        roots.sort_unstable();
        roots.dedup();
        Ok(roots)
    }

    /// An open drain with a live claim in the tree of `root`.
    fn drain_targeting(&self, root: ProviderId, now: Timestamp) -> Option<Uuid> {
        let in_tree = |provider: &Uuid| {
            self.provider_by_uuid(provider)
                .is_some_and(|p| p.row.root == root)
        };
        self.drains()
            .filter(|d| d.state == DrainState::Open)
            .find(|d| {
                d.claims.iter().any(|c| {
                    self.claim(&c.claim).is_some_and(|c| {
                        c.live(now) && c.allocations.iter().any(|a| in_tree(&a.provider))
                    })
                })
            })
            .map(|d| d.uuid)
    }

    /// The consumers holding allocations in the trees of `roots` (only those of
    /// `subset`, which must all hold some there), sorted.
    fn consumers_in(
        &self,
        roots: &[ProviderId],
        subset: Option<&[Uuid]>,
    ) -> crate::Result<Vec<Uuid>> {
        let mut found: BTreeSet<Uuid> = BTreeSet::new();
        for p in self.providers().filter(|p| roots.contains(&p.row.root)) {
            found.extend(p.usage.consumers.iter().copied());
        }
        match subset {
            None => Ok(found.into_iter().collect()),
            Some(subset) => {
                if let Some(stray) = subset.iter().find(|c| !found.contains(c)) {
                    return Err(Error::invalid(format!(
                        "Consumer {stray} holds nothing on the roots of the drain."
                    )));
                }
                let mut subset = subset.to_vec();
                subset.sort_unstable();
                subset.dedup();
                Ok(subset)
            }
        }
    }

    /// Each consumer's claim, shape and query: a group per provider of the drained
    /// trees it holds something on, the sharing pools it keeps to be reached.
    fn drain_instances(
        &self,
        new: &NewDrain,
        roots: &[ProviderId],
        consumers: &[Uuid],
        claim_uuid: &mut dyn FnMut() -> Uuid,
    ) -> (Vec<NewClaim>, Vec<Shape>, Vec<CandidateQuery>) {
        let (mut claims, mut shapes, mut queries) = (Vec::new(), Vec::new(), Vec::new());
        for uuid in consumers {
            let Some(consumer) = self.consumer(uuid) else {
                continue;
            };
            let mut by_provider: BTreeMap<ProviderId, Vec<(RequestedName<ResourceClass>, u64)>> =
                BTreeMap::new();
            let mut reach = Vec::new();
            for a in consumer.allocations.iter() {
                let Some(p) = self.provider(a.provider) else {
                    continue;
                };
                if roots.contains(&p.row.root) {
                    let amounts = by_provider.entry(a.provider).or_default();
                    amounts.push((RequestedName::Name(a.class.clone()), a.used));
                } else if p.traits.contains(SHARING_TRAIT) && !reach.contains(&p.id()) {
                    reach.push(p.id());
                }
            }
            let query = new
                .requests
                .get(uuid)
                .cloned()
                .unwrap_or_else(|| CandidateQuery {
                    groups: by_provider
                        .into_values()
                        .enumerate()
                        .map(|(i, resources)| RequestGroup {
                            suffix: format!("{}", i + 1),
                            resources,
                            ..RequestGroup::default()
                        })
                        .collect(),
                    root_required: new
                        .required
                        .iter()
                        .cloned()
                        .map(RequestedName::Name)
                        .collect(),
                    nested_aware: true,
                    weigh: new.weigh.clone(),
                    ..CandidateQuery::default()
                });
            claims.push(NewClaim {
                uuid: claim_uuid(),
                consumer: *uuid,
                project_id: consumer.row.project_id.to_string(),
                user_id: consumer.row.user_id.to_string(),
                consumer_type: consumer.row.consumer_type.as_ref().map(|t| t.to_string()),
                tag: Some(format!("drain {}", new.uuid)),
                allocations: Vec::new(),
                expires_at: new.expires_at,
                server_group: None,
            });
            shapes.push(Shape {
                query: Some(query.clone()),
                reach,
            });
            queries.push(query);
        }
        (claims, shapes, queries)
    }

    /// Why no target was found for `consumer` (whose query is at its place in
    /// `consumers`), in the words `explain` uses.
    fn why_unplaced(
        &self,
        consumer: &Uuid,
        consumers: &[Uuid],
        queries: &[CandidateQuery],
        options: &SearchOptions,
    ) -> String {
        let at = consumers.iter().position(|x| x == consumer).unwrap_or(0);
        match self.explain(&queries[at], options) {
            Ok(e) => e.emptied_by.unwrap_or_else(|| {
                "the server groups' rules, the drain's other consumers or the sharing \
                 pools it must reach leave no root"
                    .to_owned()
            }),
            Err(e) => e.to_string(),
        }
    }

    /// The disabled trait given to those of `roots` that lack it, which `drain`
    /// records.
    fn disable(&self, roots: &[ProviderId], drain: &mut Drain, now: Timestamp) -> Vec<Change> {
        let mut changes = Vec::new();
        for &root in roots.iter().filter(|&&r| !self.has_disabled(r)) {
            changes.extend(self.set_disabled(root, true, now));
            drain.disabled.push(self.uuid_of(root));
        }
        changes
    }

    fn has_disabled(&self, root: ProviderId) -> bool {
        self.provider(root)
            .is_some_and(|p| p.traits.contains(DISABLED_TRAIT))
    }

    /// The changes that give `root` the disabled trait (`on`) or take it off; none
    /// when it is so already.
    fn set_disabled(&self, root: ProviderId, on: bool, now: Timestamp) -> Vec<Change> {
        let Some(p) = self.provider(root) else {
            return Vec::new();
        };
        if self.has_disabled(root) == on {
            return Vec::new();
        }
        let mut traits: Vec<TraitName> = p
            .traits
            .iter()
            .filter(|t| t.as_str() != DISABLED_TRAIT)
            .cloned()
            .collect();
        if on {
            traits.push(TraitName::new_unchecked(DISABLED_TRAIT));
        }
        vec![Change::SetTraits(root, traits), bump(p, now)]
    }

    /// The disabled trait taken off the roots the drain gave it.
    fn enable_again(&self, drain: &Drain, now: Timestamp) -> Vec<Change> {
        drain
            .disabled
            .iter()
            .filter_map(|u| self.provider_by_uuid(u))
            .flat_map(|p| self.set_disabled(p.id(), false, now))
            .collect()
    }
}

#[cfg(test)]
mod tests;
