//! Pending claims (an allot extension beside the Placement API): resources promised
//! to a consumer that has not started yet.
//!
//! A claim is one record per consumer and promise, listing amounts on one or more
//! providers. While it is *live* (pending and not past its expiry) it counts against
//! capacity everywhere capacity is decided, exactly as an allocation would: every
//! total is a sum over the live records at the moment asked (`Provider::used`), never
//! a counter, so a release that comes twice, or after expiry, changes nothing.
//!
//! The life of a claim, as the rules here decide it:
//!
//! - **made** ([`State::plan_create_claim`]): all or nothing across its providers,
//!   with the checks of an allocation write (providers and classes exist, the
//!   provider has inventory of the class, `min_unit`/`max_unit`/`step_size`, and what
//!   allocations and live claims use plus the amount fits in `(total - reserved) *
//!   allocation_ratio`). Unlike an allocation write there is no "no worse than
//!   before" exception: a claim always adds.
//! - **confirmed** ([`State::plan_confirm_claim`]): becomes allocations of its
//!   consumer in the same plan, added to what the consumer holds or replacing it.
//!   The allocation write is planned by the one allocation rule against the view with
//!   the claim already confirmed, so that the claim's own promise makes room for the
//!   allocation that replaces it. A second confirm is a no-op; confirming a released
//!   or expired claim is refused.
//! - **released** ([`State::plan_release_claim`], [`State::plan_release_consumer_claims`]):
//!   stops counting. Releasing a claim that already ended changes nothing.
//! - **expired**: stops counting at its expiry instant, because every reader compares
//!   the expiry with the time of its question. [`State::plan_sweep_claims`] records
//!   the state later and purges ended claims once they are older than the retention,
//!   which changes no total.
//!
//! Claims bump no provider generation: they change no provider's inventories, traits
//! or allocations, which is what a provider generation guards.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::allocations::{ConsumerGeneration, ConsumerWrite, Endpoint, Requested};
use super::placing::{merged, place, Unfit};
use super::server_groups::Enforced;
use super::Plan;
use crate::change::Change;
use crate::error::{ConflictCode, Error};
use crate::model::{Claim, ClaimAmount, ClaimState, Provider, ProviderId, Timestamp};
use crate::names::{ProviderRef, RequestedName, ResourceClass, Text};
use crate::state::State;

/// A claim as a request asks for it, checked for form at the edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewClaim {
    /// The claim's uuid (drawn by the caller: the core draws nothing at random).
    pub uuid: Uuid,
    /// The consumer the resources are promised to.
    pub consumer: Uuid,
    /// The consumer's project.
    pub project_id: String,
    /// The consumer's user.
    pub user_id: String,
    /// The consumer's type, if given.
    pub consumer_type: Option<String>,
    /// Free text the caller interprets.
    pub tag: Option<String>,
    /// The amounts, in request order (zero amounts are dropped).
    pub allocations: Vec<Requested>,
    /// When the claim stops counting (None: never).
    pub expires_at: Option<Timestamp>,
    /// The server group the consumer joins with it (None: it joins none; it stays
    /// in those it is in).
    pub server_group: Option<Uuid>,
}

/// What `GET /claims` filters on; every field set must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimFilter {
    /// The claim's consumer.
    pub consumer: Option<Uuid>,
    /// A provider the claim promises something on.
    pub provider: Option<Uuid>,
    /// The consumer's project.
    pub project_id: Option<String>,
    /// The consumer's type.
    pub consumer_type: Option<String>,
    /// The tag, exactly.
    pub tag: Option<String>,
    /// The state at the time of the question.
    pub state: Option<ClaimState>,
    /// A class the claim promises an amount of.
    pub resource_class: Option<ResourceClass>,
}

impl ClaimFilter {
    fn admits(&self, c: &Claim, now: Timestamp) -> bool {
        self.consumer.is_none_or(|u| c.consumer == u)
            && self
                .provider
                .is_none_or(|p| c.allocations.iter().any(|a| a.provider == p))
            && self
                .project_id
                .as_deref()
                .is_none_or(|p| c.project_id.as_str() == p)
            && self
                .consumer_type
                .as_deref()
                .is_none_or(|t| c.consumer_type.as_deref() == Some(t))
            && self
                .tag
                .as_deref()
                .is_none_or(|t| c.tag.as_deref() == Some(t))
            && self.state.is_none_or(|s| c.state_at(now) == s)
            && self
                .resource_class
                .as_ref()
                .is_none_or(|k| c.allocations.iter().any(|a| a.class == *k))
    }
}

/// What a sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Pending claims past their expiry, now recorded as expired.
    pub expired: usize,
    /// Ended claims older than the retention, forgotten.
    pub purged: usize,
}

/// Amounts by class.
pub type ByClass = BTreeMap<ResourceClass, u64>;

/// A claim's refusal of an amount the provider cannot take: the checks are an
/// allocation's, the wording (and the code) the claim's own.
fn does_not_fit(unfit: Unfit, amount: u64, class: &ResourceClass, provider: Uuid) -> Error {
    let start = format!("Unable to claim {amount} '{class}' on resource provider '{provider}'");
    let message = match unfit {
        Unfit::NoInventory => format!(
            "Unable to claim '{class}' on resource provider '{provider}': it has no inventory \
             of that class."
        ),
        Unfit::Misfit(units) => format!(
            "{start}: the amount would violate inventory constraints (min_unit {}, max_unit {}, \
             step_size {}).",
            units.min_unit, units.max_unit, units.step_size
        ),
        Unfit::OverCapacity { capacity, used } => format!(
            "{start}: the amount would exceed the capacity ({} in all, {used} allocated or \
             promised).",
            capacity.max(0)
        ),
    };
    Error::conflict(ConflictCode::ClaimDoesNotFit, message)
}

fn unknown_claim(uuid: &Uuid) -> Error {
    Error::not_found(format!("No claim with uuid {uuid} found."))
}

impl State {
    /// Plans a new pending claim (see the module doc for the checks), its consumer
    /// joining the group it names; refused if it would make a hard rule of the
    /// consumer's groups more broken. Answers the claim as recorded.
    pub fn plan_create_claim(&self, new: NewClaim, now: Timestamp) -> Plan<Claim> {
        let consumer = new.consumer;
        let (claim, changes) = self.plan_claim_unkept(new, now)?;
        self.kept_after(&changes, &[consumer], Enforced::Always, now)?;
        Ok((claim, changes))
    }

    /// [`State::plan_create_claim`] but for the groups' rules, which the caller
    /// keeps (a pick checks them as it chooses).
    pub(crate) fn plan_claim_unkept(&self, new: NewClaim, now: Timestamp) -> Plan<Claim> {
        if self.claim(&new.uuid).is_some() {
            return Err(Error::conflict(
                ConflictCode::Duplicate,
                format!("A claim with uuid {} already exists.", new.uuid),
            ));
        }
        // Each amount's provider and class must exist, in request order (a zero
        // amount's too); then merged by provider and class, zero amounts dropped.
        let mut named = Vec::with_capacity(new.allocations.len());
        for r in &new.allocations {
            let provider = self.provider_by_ref(&r.provider).ok_or_else(|| {
                Error::invalid(format!(
                    "Claim on resource provider '{}' that does not exist.",
                    r.provider
                ))
            })?;
            let class = self.known_class(&r.class).ok_or_else(|| {
                Error::invalid(format!(
                    "Unable to claim inventory: No such resource class {}.",
                    r.class
                ))
            })?;
            if self.is_drained(provider.row.root) {
                return Err(Error::conflict(
                    ConflictCode::ClaimDoesNotFit,
                    format!(
                        "Unable to claim on resource provider '{}': its tree is being \
                         drained, and takes no new claims until the drain ends.",
                        provider.uuid()
                    ),
                ));
            }
            named.push(((provider, class), r.used));
        }
        let merged = merged(named, |(p, c), (q, d)| p.id() == q.id() && c == d);
        if merged.is_empty() {
            return Err(Error::invalid(
                "A claim must promise a positive amount of at least one class.",
            ));
        }
        for &((provider, class), amount) in &merged {
            // A claim always adds to what is used.
            let after = |used: u64| i128::from(used) + i128::from(amount);
            place(provider, class, amount, now, after)
                .map_err(|unfit| does_not_fit(unfit, amount, class, provider.uuid()))?;
        }
        let mut allocations: Vec<ClaimAmount> = merged
            .into_iter()
            .map(|((p, class), amount)| ClaimAmount {
                provider: p.uuid(),
                class: class.clone(),
                amount,
            })
            .collect();
        allocations.sort();
        let claim = Claim {
            uuid: new.uuid,
            consumer: new.consumer,
            project_id: Text::from(new.project_id),
            user_id: Text::from(new.user_id),
            consumer_type: new.consumer_type.map(Text::from),
            tag: new.tag.map(Text::from),
            allocations: allocations.into_boxed_slice(),
            state: ClaimState::Pending,
            created_at: now,
            expires_at: new.expires_at,
            ended_at: None,
        };
        // The join first: the claim is then indexed as a member's.
        let mut changes = Vec::with_capacity(2);
        if let Some(group) = new.server_group {
            changes.extend(self.join_group(&group, new.consumer, now)?);
        }
        changes.push(Change::PutClaim(Box::new(claim.clone())));
        Ok((claim, changes))
    }

    /// Plans confirming a claim: its amounts become allocations of its consumer,
    /// added to what it holds (`replace` false) or replacing it, in the same plan as
    /// the claim's end; a claim of an open drain replaces what the consumer holds in
    /// the drained trees, whatever `replace` says. Confirming a confirmed claim changes nothing; a released or
    /// expired one is refused. Answers the claim as it is afterwards.
    pub fn plan_confirm_claim(&self, uuid: &Uuid, replace: bool, now: Timestamp) -> Plan<Claim> {
        let claim = self.claim(uuid).ok_or_else(|| unknown_claim(uuid))?;
        match claim.state_at(now) {
            ClaimState::Confirmed => return Ok((claim.clone(), Vec::new())),
            ClaimState::Pending => {}
            ended => {
                return Err(Error::conflict(
                    ConflictCode::ClaimNotPending,
                    format!(
                        "Claim {uuid} cannot be confirmed: it is {}.",
                        ended.as_str()
                    ),
                ))
            }
        }
        let confirmed = Claim {
            state: ClaimState::Confirmed,
            ended_at: Some(now),
            ..claim.clone()
        };
        let end = Change::PutClaim(Box::new(confirmed.clone()));

        // What the consumer keeps: all (added to) or nothing (replaced); a drain's
        // claim replaces what the consumer holds in the drained trees alone (what
        // it holds on a sharing pool or another tree stays).
        let drained: Option<Vec<ProviderId>> = self.drain_of_claim(uuid).map(|d| {
            d.roots
                .iter()
                .filter_map(|u| self.provider_by_uuid(u))
                .map(|p| p.id())
                .collect()
        });
        let keeps = |provider: ProviderId| match &drained {
            Some(roots) => self
                .provider(provider)
                .is_some_and(|p| !roots.contains(&p.row.root)),
            None => !replace,
        };
        let mut allocations: Vec<Requested> = Vec::new();
        if let Some(c) = self.consumer(&claim.consumer) {
            allocations.extend(c.allocations.iter().filter(|a| keeps(a.provider)).map(|a| {
                Requested {
                    provider: ProviderRef::Uuid(self.uuid_of(a.provider)),
                    class: RequestedName::Name(a.class.clone()),
                    used: a.used,
                }
            }));
        }
        allocations.extend(claim.allocations.iter().map(|a| Requested {
            provider: ProviderRef::Uuid(a.provider),
            class: RequestedName::Name(a.class.clone()),
            used: a.amount,
        }));
        let write = ConsumerWrite {
            consumer: claim.consumer,
            project_id: claim.project_id.to_string(),
            user_id: claim.user_id.to_string(),
            consumer_type: claim.consumer_type.as_ref().map(|t| t.to_string()),
            generation: ConsumerGeneration::Unchecked,
            allocations,
        };
        // The claim's promise makes room for the allocation that replaces it.
        let mut after = self.clone();
        after.apply(std::slice::from_ref(&end));
        let ((), mut changes) = after.plan_allocations(&[write], Endpoint::Put, now)?;
        changes.insert(0, end);
        self.kept_after(&changes, &[claim.consumer], Enforced::Always, now)?;
        Ok((confirmed, changes))
    }

    /// Plans releasing a claim: a live one ends; one that already ended (released,
    /// confirmed or expired) is left as it is. Answers the claim as it is afterwards.
    pub fn plan_release_claim(&self, uuid: &Uuid, now: Timestamp) -> Plan<Claim> {
        let claim = self.claim(uuid).ok_or_else(|| unknown_claim(uuid))?;
        if !claim.live(now) {
            return Ok((claim.clone(), Vec::new()));
        }
        let released = Claim {
            state: ClaimState::Released,
            ended_at: Some(now),
            ..claim.clone()
        };
        Ok((released.clone(), vec![Change::PutClaim(Box::new(released))]))
    }

    /// Plans releasing every live claim of a consumer (a workload deleted before it
    /// started). Answers how many were released (none is not an error).
    pub fn plan_release_consumer_claims(&self, consumer: &Uuid, now: Timestamp) -> Plan<usize> {
        let mut live: Vec<&Claim> = self
            .claims()
            .filter(|c| c.consumer == *consumer && c.live(now))
            .collect();
        live.sort_by_key(|c| c.uuid);
        let changes: Vec<Change> = live
            .iter()
            .map(|c| {
                Change::PutClaim(Box::new(Claim {
                    state: ClaimState::Released,
                    ended_at: Some(now),
                    ..(*c).clone()
                }))
            })
            .collect();
        Ok((changes.len(), changes))
    }

    /// Plans the sweeper's pass: pending claims past their expiry are recorded as
    /// expired (which changes no total: they stopped counting at their expiry), and
    /// claims that ended at least `retention` seconds ago are forgotten. At most
    /// `max` changes, so that a sweep after a long stop does not make one huge batch.
    pub fn plan_sweep_claims(&self, now: Timestamp, retention: i64, max: usize) -> Plan<Swept> {
        let mut swept = Swept::default();
        let mut changes = Vec::new();
        let mut claims: Vec<&Claim> = self.claims().collect();
        claims.sort_by_key(|c| (c.created_at, c.uuid));
        for c in claims {
            if changes.len() >= max {
                break;
            }
            match c.state_at(now) {
                ClaimState::Pending => {}
                _ if c
                    .ended_at(now)
                    .is_some_and(|t| t.saturating_add(retention) <= now) =>
                {
                    changes.push(Change::DeleteClaim(c.uuid));
                    swept.purged += 1;
                }
                ClaimState::Expired if c.state == ClaimState::Pending => {
                    changes.push(Change::PutClaim(Box::new(Claim {
                        state: ClaimState::Expired,
                        ended_at: c.expires_at,
                        ..c.clone()
                    })));
                    swept.expired += 1;
                }
                _ => {}
            }
        }
        Ok((swept, changes))
    }

    /// The changes that record as expired the claims indexed on `provider` that are
    /// past their expiry: for a plan that deletes the provider (live claims forbid
    /// that), so that no pending record outlives its provider.
    pub(crate) fn expire_claims_on(&self, provider: &Provider, now: Timestamp) -> Vec<Change> {
        let mut uuids: Vec<Uuid> = provider.pending.iter().map(|e| e.claim).collect();
        uuids.sort();
        uuids.dedup();
        uuids
            .iter()
            .filter_map(|u| self.claim(u))
            .filter(|c| c.state == ClaimState::Pending && !c.live(now))
            .map(|c| {
                Change::PutClaim(Box::new(Claim {
                    state: ClaimState::Expired,
                    ended_at: c.expires_at,
                    ..c.clone()
                }))
            })
            .collect()
    }

    /// The claims `filter` admits at `now`, ordered by creation time then uuid,
    /// starting after the claim `marker` (a page's last), at most `limit` of them.
    /// None when the marker names no claim.
    pub fn list_claims(
        &self,
        filter: &ClaimFilter,
        now: Timestamp,
        marker: Option<&Uuid>,
        limit: Option<usize>,
    ) -> Option<Vec<&Claim>> {
        let after = match marker {
            Some(m) => Some(self.claim(m).map(|c| (c.created_at, c.uuid))?),
            None => None,
        };
        let mut found: Vec<&Claim> = self
            .claims()
            .filter(|c| after.is_none_or(|a| (c.created_at, c.uuid) > a))
            .filter(|c| filter.admits(c, now))
            .collect();
        found.sort_by_key(|c| (c.created_at, c.uuid));
        if let Some(limit) = limit {
            found.truncate(limit);
        }
        Some(found)
    }

    /// What live claims promise on a provider at `now`, in all and per consumer.
    pub fn provider_pending(
        &self,
        id: ProviderId,
        now: Timestamp,
    ) -> (ByClass, BTreeMap<Uuid, ByClass>) {
        let mut sums = (ByClass::new(), BTreeMap::new());
        if let Some(p) = self.provider(id) {
            add_pending(p, now, &mut sums);
        }
        sums
    }

    /// [`State::provider_pending`] summed over a provider and every provider below
    /// it: a host with its NUMA nodes and devices.
    pub fn tree_pending(
        &self,
        id: ProviderId,
        now: Timestamp,
    ) -> (ByClass, BTreeMap<Uuid, ByClass>) {
        let mut sums = (ByClass::new(), BTreeMap::new());
        let mut below = vec![id];
        while let Some(id) = below.pop() {
            let Some(p) = self.provider(id) else {
                continue;
            };
            below.extend(p.children.iter().copied());
            add_pending(p, now, &mut sums);
        }
        sums
    }

    /// What live claims of a consumer, or of a project's consumers, promise at `now`,
    /// summed over their providers.
    pub fn pending_totals(
        &self,
        consumer: Option<&Uuid>,
        project_id: Option<&str>,
        now: Timestamp,
    ) -> ByClass {
        let mut total = ByClass::new();
        for a in self
            .live_claims_of(consumer, project_id, now)
            .flat_map(|c| c.allocations.iter())
        {
            *total.entry(a.class.clone()).or_insert(0) += a.amount;
        }
        total
    }

    /// [`State::pending_totals`] by the root of each provider promised on, in one pass
    /// over the claims: every host's pending amounts, its NUMA nodes and devices
    /// included, in one answer. Roots with nothing pending are left out.
    pub fn pending_by_root(
        &self,
        consumer: Option<&Uuid>,
        project_id: Option<&str>,
        now: Timestamp,
    ) -> BTreeMap<Uuid, ByClass> {
        let mut roots = BTreeMap::<Uuid, ByClass>::new();
        for a in self
            .live_claims_of(consumer, project_id, now)
            .flat_map(|c| c.allocations.iter())
        {
            // A live claim's providers exist (a provider with live claims on it cannot
            // be deleted); one that does not would count nowhere.
            let Some(root) = self
                .provider_by_uuid(&a.provider)
                .and_then(|p| self.provider(p.row.root))
            else {
                continue;
            };
            let sums = roots.entry(root.uuid()).or_default();
            *sums.entry(a.class.clone()).or_insert(0) += a.amount;
        }
        roots
    }

    /// The claims live at `now` of a consumer and of a project, when given.
    fn live_claims_of<'a>(
        &'a self,
        consumer: Option<&'a Uuid>,
        project_id: Option<&'a str>,
        now: Timestamp,
    ) -> impl Iterator<Item = &'a Claim> + 'a {
        self.claims().filter(move |c| {
            c.live(now)
                && consumer.is_none_or(|u| c.consumer == *u)
                && project_id.is_none_or(|p| c.project_id.as_str() == p)
        })
    }
}

/// Adds what live claims promise on `p` at `now` to the sums, in all and per consumer.
fn add_pending(
    p: &Provider,
    now: Timestamp,
    (total, by_consumer): &mut (ByClass, BTreeMap<Uuid, ByClass>),
) {
    for e in p.pending.iter().filter(|e| e.live(now)) {
        *total.entry(e.class.clone()).or_insert(0) += e.amount;
        *by_consumer
            .entry(e.consumer)
            .or_default()
            .entry(e.class.clone())
            .or_insert(0) += e.amount;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candidates::{CandidateQuery, RequestGroup, SearchOptions};
    use crate::model::Inventory;
    use crate::testing::new_provider;

    const RP: u128 = 1;

    fn vcpu() -> ResourceClass {
        ResourceClass::new_unchecked("VCPU")
    }

    /// One provider with `capacity` VCPU.
    fn world(capacity: u64) -> State {
        let mut s = State::new();
        s.apply(&[
            new_provider(1, Uuid::from_u128(RP), None, 0),
            Change::SetInventories(
                ProviderId(1),
                vec![(vcpu(), Inventory::with_total(capacity))],
            ),
        ]);
        s
    }

    fn ask(uuid: u128, consumer: u128, amount: u64, expires_at: Option<Timestamp>) -> NewClaim {
        NewClaim {
            uuid: Uuid::from_u128(uuid),
            consumer: Uuid::from_u128(consumer),
            project_id: "p".into(),
            user_id: "u".into(),
            consumer_type: None,
            tag: Some("t".into()),
            allocations: vec![Requested {
                provider: Uuid::from_u128(RP).into(),
                class: RequestedName::Name(vcpu()),
                used: amount,
            }],
            expires_at,
            server_group: None,
        }
    }

    /// Plans (against `$s`) and applies; answers what the plan answered.
    macro_rules! run {
        ($s:ident, $plan:expr) => {{
            let plan = $plan;
            apply(&mut $s, plan)
        }};
    }

    /// Applies a plan's changes and checks the indexes.
    fn apply<T>(s: &mut State, plan: Plan<T>) -> crate::Result<T> {
        let (answer, changes) = plan?;
        s.apply(&changes);
        assert!(s.check_usage_index());
        Ok(answer)
    }

    fn used(s: &State, now: Timestamp) -> u64 {
        s.used(ProviderId(1), &vcpu(), now)
    }

    fn allocate(s: &mut State, consumer: u128, amount: u64, now: Timestamp) -> crate::Result<()> {
        let write = ConsumerWrite {
            consumer: Uuid::from_u128(consumer),
            project_id: "p".into(),
            user_id: "u".into(),
            consumer_type: None,
            generation: ConsumerGeneration::Unchecked,
            allocations: vec![Requested {
                provider: Uuid::from_u128(RP).into(),
                class: RequestedName::Name(vcpu()),
                used: amount,
            }],
        };
        let plan = s.plan_allocations(&[write], Endpoint::Put, now);
        apply(s, plan)
    }

    fn candidates(s: &State, amount: u64, now: Timestamp) -> usize {
        let query = CandidateQuery {
            groups: vec![RequestGroup {
                resources: vec![(RequestedName::Name(vcpu()), amount)],
                ..Default::default()
            }],
            now,
            ..Default::default()
        };
        s.allocation_candidates(&query, &SearchOptions::default())
            .unwrap()
            .requests
            .len()
    }

    #[test]
    fn claims_count_against_capacity_with_allocations() {
        let mut s = world(8);
        allocate(&mut s, 100, 3, 10).unwrap();
        run!(s, s.plan_create_claim(ask(1, 200, 4, None), 10)).unwrap();
        assert_eq!(used(&s, 10), 7);
        assert_eq!(s.usage(ProviderId(1), &vcpu()), 3, "usages are allocations");
        let e = run!(s, s.plan_create_claim(ask(2, 201, 2, None), 10)).unwrap_err();
        assert!(
            matches!(&e, Error::Conflict { code: ConflictCode::ClaimDoesNotFit, message }
                if message.contains("VCPU") && message.contains(&Uuid::from_u128(RP).to_string())),
            "{e:?}"
        );
        assert!(
            allocate(&mut s, 101, 2, 10).is_err(),
            "allocations see the claim"
        );
        assert_eq!(candidates(&s, 2, 10), 0, "candidates see the claim");
        assert_eq!(candidates(&s, 1, 10), 1);
        run!(s, s.plan_create_claim(ask(2, 201, 1, None), 10)).unwrap();
        assert_eq!(used(&s, 10), 8);
    }

    #[test]
    fn expiry_is_exact_and_the_sweep_changes_no_total() {
        let mut s = world(4);
        run!(s, s.plan_create_claim(ask(1, 200, 4, Some(100)), 10)).unwrap();
        assert_eq!(used(&s, 99), 4);
        assert_eq!(candidates(&s, 1, 99), 0);
        assert_eq!(used(&s, 100), 0, "stops counting at its expiry instant");
        assert_eq!(candidates(&s, 4, 100), 1);
        let c = s.claim(&Uuid::from_u128(1)).unwrap();
        assert_eq!(c.state_at(100), ClaimState::Expired);
        // Releasing or confirming after expiry changes nothing / is refused.
        let (_, changes) = s.plan_release_claim(&Uuid::from_u128(1), 100).unwrap();
        assert!(changes.is_empty());
        assert!(matches!(
            s.plan_confirm_claim(&Uuid::from_u128(1), false, 100),
            Err(Error::Conflict {
                code: ConflictCode::ClaimNotPending,
                ..
            })
        ));
        // The sweep records the expiry, then purges after the retention.
        let swept = run!(s, s.plan_sweep_claims(150, 60, 100)).unwrap();
        assert_eq!(
            swept,
            Swept {
                expired: 1,
                purged: 0
            }
        );
        assert_eq!(used(&s, 150), 0);
        assert_eq!(
            s.claim(&Uuid::from_u128(1)).unwrap().state,
            ClaimState::Expired
        );
        let swept = run!(s, s.plan_sweep_claims(159, 60, 100)).unwrap();
        assert_eq!(swept, Swept::default());
        let swept = run!(s, s.plan_sweep_claims(160, 60, 100)).unwrap();
        assert_eq!(
            swept,
            Swept {
                expired: 0,
                purged: 1
            }
        );
        assert!(s.claim(&Uuid::from_u128(1)).is_none());
    }

    #[test]
    fn releasing_twice_is_harmless() {
        let mut s = world(4);
        run!(s, s.plan_create_claim(ask(1, 200, 3, None), 10)).unwrap();
        let released = run!(s, s.plan_release_claim(&Uuid::from_u128(1), 11)).unwrap();
        assert_eq!(released.state, ClaimState::Released);
        assert_eq!(used(&s, 11), 0);
        let (again, changes) = s.plan_release_claim(&Uuid::from_u128(1), 12).unwrap();
        assert!(changes.is_empty());
        assert_eq!(again.ended_at, Some(11));
        assert!(matches!(
            s.plan_release_claim(&Uuid::from_u128(9), 12),
            Err(Error::NotFound(_))
        ));
        // By consumer: only the live ones.
        run!(s, s.plan_create_claim(ask(2, 200, 1, None), 13)).unwrap();
        run!(s, s.plan_create_claim(ask(3, 200, 1, Some(14)), 13)).unwrap();
        run!(s, s.plan_create_claim(ask(4, 201, 1, None), 13)).unwrap();
        let n = run!(s, s.plan_release_consumer_claims(&Uuid::from_u128(200), 20)).unwrap();
        assert_eq!(n, 1);
        assert_eq!(used(&s, 20), 1);
        let n = run!(s, s.plan_release_consumer_claims(&Uuid::from_u128(200), 21)).unwrap();
        assert_eq!(n, 0);
    }

    #[test]
    fn confirming_adds_or_replaces() {
        let mut s = world(10);
        allocate(&mut s, 200, 2, 10).unwrap();
        let generation = s.consumer(&Uuid::from_u128(200)).unwrap().row.generation;
        run!(s, s.plan_create_claim(ask(1, 200, 3, Some(50)), 10)).unwrap();
        let c = run!(s, s.plan_confirm_claim(&Uuid::from_u128(1), false, 20)).unwrap();
        assert_eq!(c.state, ClaimState::Confirmed);
        let consumer = s.consumer(&Uuid::from_u128(200)).unwrap();
        assert_eq!(consumer.allocations[0].used, 5, "added to what it held");
        assert!(consumer.row.generation > generation);
        assert_eq!(used(&s, 20), 5, "the promise became the allocation");
        // A second confirm is a no-op, even after the claim's expiry.
        let (_, changes) = s
            .plan_confirm_claim(&Uuid::from_u128(1), false, 60)
            .unwrap();
        assert!(changes.is_empty());

        // Replace: a move that claims the target and drops the source in one step.
        run!(s, s.plan_create_claim(ask(2, 200, 4, None), 30)).unwrap();
        assert_eq!(used(&s, 30), 9);
        run!(s, s.plan_confirm_claim(&Uuid::from_u128(2), true, 31)).unwrap();
        assert_eq!(
            s.consumer(&Uuid::from_u128(200)).unwrap().allocations[0].used,
            4
        );
        assert_eq!(used(&s, 31), 4);
    }

    #[test]
    fn a_full_provider_still_confirms_its_own_claim() {
        let mut s = world(4);
        run!(s, s.plan_create_claim(ask(1, 200, 4, None), 10)).unwrap();
        run!(s, s.plan_confirm_claim(&Uuid::from_u128(1), true, 11)).unwrap();
        assert_eq!(s.usage(ProviderId(1), &vcpu()), 4);
    }

    #[test]
    fn inventory_and_provider_cannot_go_under_a_live_claim() {
        let mut s = world(4);
        run!(s, s.plan_create_claim(ask(1, 200, 1, Some(100)), 10)).unwrap();
        let rp = Uuid::from_u128(RP);
        assert!(s.delete_inventories(&rp, 50).is_err());
        assert!(matches!(
            s.delete_provider(&rp, 50),
            Err(Error::Conflict {
                code: ConflictCode::ProviderInUse,
                ..
            })
        ));
        // Once expired, both may go; the claim is recorded as expired with the delete.
        assert!(s.delete_inventories(&rp, 100).is_ok());
        run!(s, s.delete_provider(&rp, 100)).unwrap();
        assert_eq!(
            s.claim(&Uuid::from_u128(1)).unwrap().state,
            ClaimState::Expired
        );
    }

    #[test]
    fn listing_filters_and_pages() {
        let mut s = world(100);
        for i in 1..=5u128 {
            let mut a = ask(i, 200 + i % 2, 1, Some(50));
            a.tag = Some(format!("t{}", i % 2));
            run!(s, s.plan_create_claim(a, i as i64)).unwrap();
        }
        let all = ClaimFilter::default();
        let page = s.list_claims(&all, 10, None, Some(2)).unwrap();
        assert_eq!(page.len(), 2);
        let rest = s.list_claims(&all, 10, Some(&page[1].uuid), None).unwrap();
        assert_eq!(rest.len(), 3);
        assert!(s
            .list_claims(&all, 10, Some(&Uuid::from_u128(99)), None)
            .is_none());
        let tagged = ClaimFilter {
            tag: Some("t1".into()),
            ..Default::default()
        };
        assert_eq!(s.list_claims(&tagged, 10, None, None).unwrap().len(), 3);
        let expired = ClaimFilter {
            state: Some(ClaimState::Expired),
            ..Default::default()
        };
        assert_eq!(s.list_claims(&expired, 60, None, None).unwrap().len(), 5);
        let of_class = |name: &str| ClaimFilter {
            resource_class: Some(ResourceClass::new_unchecked(name)),
            ..Default::default()
        };
        assert_eq!(
            s.list_claims(&of_class("VCPU"), 10, None, None)
                .unwrap()
                .len(),
            5
        );
        assert!(s
            .list_claims(&of_class("DISK_GB"), 10, None, None)
            .unwrap()
            .is_empty());
        let (total, by_consumer) = s.provider_pending(ProviderId(1), 10);
        assert_eq!(total.get("VCPU"), Some(&5));
        assert_eq!(by_consumer.len(), 2);
        assert_eq!(
            s.pending_totals(Some(&Uuid::from_u128(201)), None, 10)
                .get("VCPU"),
            Some(&3)
        );
        assert_eq!(s.pending_totals(None, Some("p"), 60).len(), 0);
        let by_root = s.pending_by_root(None, None, 10);
        assert_eq!(by_root.len(), 1);
        assert_eq!(by_root[&Uuid::from_u128(RP)].get("VCPU"), Some(&5));
        let of_201 = s.pending_by_root(Some(&Uuid::from_u128(201)), None, 10);
        assert_eq!(of_201[&Uuid::from_u128(RP)].get("VCPU"), Some(&3));
        assert!(s.pending_by_root(None, None, 60).is_empty());
    }
}
