//! Server groups' rules (issue 44): Nova's affinity policies over consumers, and the
//! failure domains they are kept in.
//!
//! A server group's members are consumers; a member *is* on the roots of its live
//! claims if it has any, else of its allocations ([`State::member_roots`]), read at
//! the writer's `now`: a member in transit counts once, where it is going. Providers
//! that share through aggregates are no place (they serve many roots). A rule's
//! [`Scope`] maps each root to its domains: the root itself (Nova's "host"), each of
//! its aggregates, or each of its traits that begin with a prefix (`trait:CUSTOM_RACK_`),
//! as `GET /headroom`'s `group_by` keys roots. A root in several domains is in each;
//! a root in none conflicts with nothing.
//!
//! How broken a group is, is a number ([`Rule::broken`]), 0 when the rule holds:
//! - anti-affinity: over the domains, how many members beyond `max_per_domain` each
//!   holds (Nova's `max_server_per_host`, 1 by default);
//! - affinity: how many placed members are outside the domain that holds the most.
//!
//! The writer refuses a write that would make a hard rule's number grow, and so a
//! group that starts broken (imported from Nova after a forced move) may be mended,
//! never made worse; a pick tries first the roots that leave a soft rule's number
//! as it is.

use std::fmt;

use uuid::Uuid;

use crate::model::{Provider, ProviderId, Timestamp};
use crate::names::{is_well_formed_name, TraitName};
use crate::ops::server_groups::RootCheck;
use crate::state::State;

/// A server group's record: its rule and its members.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServerGroup {
    /// The group's id (Nova's, for a group imported from it).
    pub uuid: Uuid,
    /// Its name (not unique, as in Nova).
    pub name: String,
    /// The project it belongs to.
    pub project_id: String,
    /// The user who made it.
    pub user_id: String,
    /// The policy.
    pub policy: Policy,
    /// For anti-affinity: how many members one domain may hold (Nova's
    /// `max_server_per_host`, at least 1).
    pub max_per_domain: u32,
    /// The failure domains the rule is kept in.
    pub scope: Scope,
    /// Whether Placement's own allocation writes are checked too (see
    /// `State::plan_allocations_kept`).
    pub enforce_on_allocations: bool,
    /// The members (consumers), sorted, each once.
    pub members: Vec<Uuid>,
    /// When it was made.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

impl ServerGroup {
    /// Its rule.
    pub fn rule(&self) -> Rule {
        Rule {
            policy: self.policy,
            max_per_domain: self.max_per_domain,
            scope: self.scope.clone(),
        }
    }

    /// Whether `consumer` is a member.
    pub fn has_member(&self, consumer: &Uuid) -> bool {
        self.members.binary_search(consumer).is_ok()
    }
}

/// A group's policy, with Nova's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum Policy {
    /// Every member in one domain; refused otherwise.
    Affinity,
    /// At most `max_per_domain` members in a domain; refused otherwise.
    AntiAffinity,
    /// As `Affinity`, preferred, never refused.
    SoftAffinity,
    /// As `AntiAffinity`, preferred, never refused.
    SoftAntiAffinity,
}

impl Policy {
    /// Nova's name of the policy.
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Affinity => "affinity",
            Policy::AntiAffinity => "anti-affinity",
            Policy::SoftAffinity => "soft-affinity",
            Policy::SoftAntiAffinity => "soft-anti-affinity",
        }
    }

    /// The policy of Nova's name.
    pub fn parse(text: &str) -> Option<Policy> {
        [
            Policy::Affinity,
            Policy::AntiAffinity,
            Policy::SoftAffinity,
            Policy::SoftAntiAffinity,
        ]
        .into_iter()
        .find(|p| p.as_str() == text)
    }

    /// Whether a write that breaks it is refused.
    pub fn is_hard(self) -> bool {
        matches!(self, Policy::Affinity | Policy::AntiAffinity)
    }

    /// Whether members are kept apart (else together).
    pub fn is_anti(self) -> bool {
        matches!(self, Policy::AntiAffinity | Policy::SoftAntiAffinity)
    }
}

impl TryFrom<String> for Policy {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        Policy::parse(&text).ok_or_else(|| format!("unknown server group policy {text:?}"))
    }
}

impl From<Policy> for &'static str {
    fn from(policy: Policy) -> Self {
        policy.as_str()
    }
}

/// What a rule keeps members apart in, or together in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Scope {
    /// The root (a compute host).
    Root,
    /// Each aggregate of the root.
    Aggregate,
    /// Each trait of the root that begins with the prefix.
    TraitPrefix(String),
}

impl Scope {
    /// `root`, `aggregate` or `trait:PREFIX` (a prefix of a well-formed trait name).
    pub fn parse(text: &str) -> Option<Scope> {
        match text {
            "root" => Some(Scope::Root),
            "aggregate" => Some(Scope::Aggregate),
            _ => {
                let prefix = text.strip_prefix("trait:")?;
                is_well_formed_name(prefix).then(|| Scope::TraitPrefix(prefix.to_owned()))
            }
        }
    }

    /// `root`, `aggregate` or `trait` (a store's column; the prefix is another).
    pub fn kind(&self) -> &'static str {
        match self {
            Scope::Root => "root",
            Scope::Aggregate => "aggregate",
            Scope::TraitPrefix(_) => "trait",
        }
    }

    /// The trait prefix of a `trait` scope.
    pub fn prefix(&self) -> Option<&str> {
        match self {
            Scope::TraitPrefix(prefix) => Some(prefix),
            _ => None,
        }
    }

    /// The scope of a store's two columns ([`Scope::kind`], [`Scope::prefix`]).
    pub fn from_columns(kind: &str, prefix: Option<&str>) -> Option<Scope> {
        match (kind, prefix) {
            ("trait", Some(prefix)) => Scope::parse(&format!("trait:{prefix}")),
            (kind, None) if kind != "trait" => Scope::parse(kind),
            _ => None,
        }
    }

    /// The domains a root is in.
    pub fn domains_of(&self, root: &Provider) -> Vec<Domain> {
        let mut domains = Vec::new();
        self.push_domains(root, &mut domains);
        domains
    }

    /// [`Scope::domains_of`], appended to `out`.
    pub fn push_domains(&self, root: &Provider, out: &mut Vec<Domain>) {
        match self {
            Scope::Root => out.push(Domain::Root(root.uuid())),
            Scope::Aggregate => out.extend(root.aggregates.iter().copied().map(Domain::Aggregate)),
            Scope::TraitPrefix(prefix) => out.extend(
                root.traits
                    .iter()
                    .filter(|t| t.as_str().starts_with(prefix.as_str()))
                    .cloned()
                    .map(Domain::Trait),
            ),
        }
    }
}

impl TryFrom<String> for Scope {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        Scope::parse(&text).ok_or_else(|| format!("unknown server group scope {text:?}"))
    }
}

impl From<Scope> for String {
    fn from(scope: Scope) -> Self {
        scope.to_string()
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Root => f.write_str("root"),
            Scope::Aggregate => f.write_str("aggregate"),
            Scope::TraitPrefix(prefix) => write!(f, "trait:{prefix}"),
        }
    }
}

/// One failure domain.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Domain {
    /// A root, by uuid.
    Root(Uuid),
    /// An aggregate.
    Aggregate(Uuid),
    /// A trait (of the scope's prefix).
    Trait(TraitName),
}

impl fmt::Display for Domain {
    /// The key `GET /headroom`'s `group_by` gives it: a uuid or a trait's name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Domain::Root(uuid) | Domain::Aggregate(uuid) => write!(f, "{uuid}"),
            Domain::Trait(name) => f.write_str(name.as_str()),
        }
    }
}

/// A group's rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The policy.
    pub policy: Policy,
    /// For anti-affinity: how many members a domain may hold (at least 1).
    pub max_per_domain: u32,
    /// Where it is kept.
    pub scope: Scope,
}

impl Rule {
    /// How broken the rule is (see the module doc) with its members in these
    /// domains, one list per member (empty: placed nowhere, or in no domain).
    pub fn broken(&self, members: &[Vec<Domain>]) -> u64 {
        self.tally(members.iter().map(|m| &m[..])).broken_with(&[])
    }

    /// The members counted per domain, once: how broken the rule is with them and
    /// one more member, for each root a pick considers (see [`Tally::broken_with`]).
    pub fn tally<'a>(&self, members: impl Iterator<Item = &'a [Domain]>) -> Tally {
        let mut all: Vec<Domain> = Vec::new();
        let mut placed = 0;
        for domains in members {
            placed += u64::from(!domains.is_empty());
            all.extend_from_slice(domains);
        }
        self.tally_of(all, placed)
    }

    /// The tally of `placed` members whose domains, each member's once, are `all`.
    fn tally_of(&self, mut all: Vec<Domain>, placed: u64) -> Tally {
        all.sort_unstable();
        let mut counts: Vec<(Domain, u64)> = Vec::new();
        for d in all {
            match counts.last_mut() {
                Some((last, n)) if *last == d => *n += 1,
                _ => counts.push((d, 1)),
            }
        }
        let max = u64::from(self.max_per_domain.max(1));
        Tally {
            anti: self.policy.is_anti(),
            max,
            placed,
            most: counts.iter().map(|&(_, n)| n).max().unwrap_or(0),
            over: counts.iter().map(|&(_, n)| n.saturating_sub(max)).sum(),
            counts,
        }
    }
}

/// A group's members counted per domain (see [`Rule::tally`]), so that the number
/// with one more member costs that member's domains, not a recount of all.
#[derive(Debug, Clone)]
pub struct Tally {
    anti: bool,
    /// For anti-affinity: how many members a domain may hold.
    max: u64,
    /// The members in some domain.
    placed: u64,
    /// How many members each domain holds, by domain.
    counts: Vec<(Domain, u64)>,
    /// The most any domain holds.
    most: u64,
    /// Over the domains, the members beyond `max`.
    over: u64,
}

impl Tally {
    fn count(&self, d: &Domain) -> u64 {
        self.counts
            .binary_search_by(|(at, _)| at.cmp(d))
            .map_or(0, |i| self.counts[i].1)
    }

    /// [`Rule::broken`] of the members counted and one more in `mine` (sorted, each
    /// once; empty: that member is placed nowhere, and counts for nothing).
    pub fn broken_with(&self, mine: &[Domain]) -> u64 {
        if mine.is_empty() {
            return if self.anti {
                self.over
            } else {
                self.placed - self.most
            };
        }
        if self.anti {
            // Each of its domains already full gains one over.
            self.over + mine.iter().filter(|d| self.count(d) >= self.max).count() as u64
        } else {
            let most = mine
                .iter()
                .map(|d| self.count(d) + 1)
                .fold(self.most, u64::max);
            self.placed + 1 - most
        }
    }
}

impl State {
    /// The roots a consumer is on at `now`: those of its live claims if it has any,
    /// else those of its allocations; in id order, each once. A sharing provider
    /// is no place (it serves many roots), as for a pick's affinity.
    pub fn member_roots(&self, consumer: &Uuid, now: Timestamp) -> Vec<ProviderId> {
        let mut roots = Vec::new();
        self.member_roots_in(consumer, now, &mut roots);
        roots
    }

    /// [`State::member_roots`] into `roots`, a buffer the caller reuses (a pick
    /// reads every member of its groups).
    fn member_roots_in(&self, consumer: &Uuid, now: Timestamp, roots: &mut Vec<ProviderId>) {
        roots.clear();
        self.push_live_claim_providers(consumer, now, roots);
        self.to_roots(roots);
        if roots.is_empty() {
            if let Some(c) = self.consumer(consumer) {
                roots.extend(c.allocations.iter().map(|a| a.provider));
                self.to_roots(roots);
            }
        }
        roots.sort_unstable();
        roots.dedup();
    }

    /// Providers replaced by their roots, sharing ones (no place) left out.
    fn to_roots(&self, providers: &mut Vec<ProviderId>) {
        providers.retain_mut(|id| {
            let root = (!self.sharing.contains(id))
                .then(|| self.provider(*id))
                .flatten()
                .map(|p| p.row.root);
            *id = root.unwrap_or(*id);
            root.is_some()
        });
    }

    /// The tally of `members` where they are at `now` (see [`Rule::tally`]), read
    /// with two buffers for them all rather than lists for each.
    pub(crate) fn tally_members<'a>(
        &self,
        rule: &Rule,
        members: impl Iterator<Item = &'a Uuid>,
        now: Timestamp,
    ) -> Tally {
        let mut roots = Vec::new();
        let mut all = Vec::new();
        let mut placed = 0;
        for m in members {
            self.member_roots_in(m, now, &mut roots);
            let start = all.len();
            self.push_domains_at(rule, &roots, &mut all);
            placed += u64::from(all.len() > start);
        }
        rule.tally_of(all, placed)
    }

    /// How broken `rule` is with `members` where they are at `now` (see
    /// [`Rule::broken`]): a write is checked by this number on the view before it
    /// and on the plan's copy after it.
    pub fn group_broken(&self, rule: &Rule, members: &[Uuid], now: Timestamp) -> u64 {
        self.tally_members(rule, members.iter(), now)
            .broken_with(&[])
    }

    /// Whether a new claim of member `consumer` on `root` (live at `now`) would make
    /// `rule` more broken: the check a pick makes of each root it considers
    /// (`ops::server_groups::RootCheck`), without planning the claim. The member is
    /// then on the roots of its live claims and `root`; a consumer not among
    /// `members` breaks nothing.
    pub fn claim_breaks(
        &self,
        rule: &Rule,
        members: &[Uuid],
        consumer: &Uuid,
        root: ProviderId,
        now: Timestamp,
    ) -> bool {
        let Some(root) = self.provider(root) else {
            return false;
        };
        members.contains(consumer)
            && RootCheck::new(self, Uuid::nil(), rule.clone(), members, consumer, now).breaks(root)
    }

    /// The domains member `consumer` is in at `now` under the rule's scope.
    pub fn member_domains(&self, rule: &Rule, consumer: &Uuid, now: Timestamp) -> Vec<Domain> {
        let mut domains = Vec::new();
        self.push_domains_at(rule, &self.member_roots(consumer, now), &mut domains);
        domains
    }

    /// The domains of `consumer`'s live claims at `now` under the rule's scope.
    pub(crate) fn live_claim_domains(
        &self,
        rule: &Rule,
        consumer: &Uuid,
        now: Timestamp,
    ) -> Vec<Domain> {
        let mut roots = Vec::new();
        self.push_live_claim_providers(consumer, now, &mut roots);
        self.to_roots(&mut roots);
        let mut domains = Vec::new();
        self.push_domains_at(rule, &roots, &mut domains);
        domains
    }

    /// Appends the domains of `roots` under the rule's scope to `out`, sorted, each
    /// once (a member on two roots of one domain is in it once).
    fn push_domains_at(&self, rule: &Rule, roots: &[ProviderId], out: &mut Vec<Domain>) {
        let start = out.len();
        for root in roots.iter().filter_map(|&r| self.provider(r)) {
            rule.scope.push_domains(root, out);
        }
        if out.len() > start + 1 {
            let mut mine = out.split_off(start);
            mine.sort_unstable();
            mine.dedup();
            out.append(&mut mine);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candidates::Rng;

    fn rule(policy: Policy, max: u32) -> Rule {
        Rule {
            policy,
            max_per_domain: max,
            scope: Scope::Root,
        }
    }

    fn root(n: u128) -> Domain {
        Domain::Root(Uuid::from_u128(n))
    }

    /// A member is where its live claims are, else where its allocations are; a
    /// root's domains come from the root, whichever provider of its tree is used.
    #[test]
    fn a_member_is_where_it_is_going() {
        use crate::change::Change;
        use crate::model::Inventory;
        use crate::ops::allocations::Requested;
        use crate::ops::claims::NewClaim;
        use crate::testing::{new_provider, pick_claim, rc, tn};
        let uuid = |n: u128| Uuid::from_u128(0xf000 + n);
        let mut s = State::new();
        s.apply(&[
            new_provider(1, uuid(1), None, 0),
            new_provider(2, uuid(2), Some(1), 0),
            new_provider(3, uuid(3), None, 0),
            Change::SetInventories(ProviderId(2), vec![(rc("VCPU"), Inventory::with_total(8))]),
            Change::SetInventories(ProviderId(3), vec![(rc("VCPU"), Inventory::with_total(8))]),
            Change::SetTraits(ProviderId(1), vec![tn("CUSTOM_RACK_A"), tn("CUSTOM_GOLD")]),
            Change::SetAggregates(ProviderId(1), vec![Uuid::from_u128(0xa1)]),
        ]);
        let on = |provider: u128, n: u128, expires_at| NewClaim {
            allocations: vec![Requested {
                provider: uuid(provider).into(),
                class: crate::names::ResourceClass::requested("VCPU"),
                used: 1,
            }],
            expires_at,
            consumer: Uuid::from_u128(0xc0),
            ..pick_claim(n)
        };
        let (made, changes) = s.plan_create_claim(on(2, 1, None), 0).unwrap();
        s.apply(&changes);
        let consumer = Uuid::from_u128(0xc0);
        assert_eq!(s.member_roots(&consumer, 0), vec![ProviderId(1)]);
        let (_, changes) = s.plan_confirm_claim(&made.uuid, false, 0).unwrap();
        s.apply(&changes);
        assert_eq!(s.member_roots(&consumer, 0), vec![ProviderId(1)]);
        let (_, changes) = s.plan_create_claim(on(3, 2, Some(100)), 0).unwrap();
        s.apply(&changes);
        assert_eq!(s.member_roots(&consumer, 99), vec![ProviderId(3)]);
        assert_eq!(s.member_roots(&consumer, 100), vec![ProviderId(1)]);
        assert!(s.member_roots(&Uuid::from_u128(0xbad), 0).is_empty());
        let root = s.provider(ProviderId(1)).unwrap();
        assert_eq!(Scope::Root.domains_of(root), vec![Domain::Root(uuid(1))]);
        assert_eq!(
            Scope::Aggregate.domains_of(root),
            vec![Domain::Aggregate(Uuid::from_u128(0xa1))]
        );
        let racks = Scope::parse("trait:CUSTOM_RACK_").unwrap().domains_of(root);
        assert_eq!(racks, vec![Domain::Trait(tn("CUSTOM_RACK_A"))]);
        assert_eq!(racks[0].to_string(), "CUSTOM_RACK_A");
        assert!(Scope::Aggregate
            .domains_of(s.provider(ProviderId(3)).unwrap())
            .is_empty());
        // Two members on root 1 (one through a claim on its child), one on root 3
        // until its claim expires.
        let (_, changes) = s
            .plan_create_claim(
                NewClaim {
                    consumer: Uuid::from_u128(0xc1),
                    ..on(2, 3, None)
                },
                0,
            )
            .unwrap();
        s.apply(&changes);
        let members = [consumer, Uuid::from_u128(0xc1), Uuid::from_u128(0xbad)];
        let anti = rule(Policy::AntiAffinity, 1);
        assert_eq!(s.group_broken(&anti, &members, 99), 0);
        assert_eq!(s.group_broken(&anti, &members, 100), 1);
        let together = rule(Policy::Affinity, 1);
        assert_eq!(s.group_broken(&together, &members, 99), 1);
        assert_eq!(s.group_broken(&together, &members, 100), 0);
        // Root 3 is in no aggregate: there, nothing conflicts.
        let by_aggregate = Rule {
            scope: Scope::Aggregate,
            ..together
        };
        assert_eq!(s.group_broken(&by_aggregate, &members, 99), 0);
    }

    /// The quick check a pick makes of a root (`State::claim_breaks`) says exactly
    /// whether making the claim would raise the group's number: over random clouds
    /// (roots in racks and aggregates, a nested tree), members with allocations,
    /// live claims and expired ones, every policy and scope.
    #[test]
    fn a_claims_check_agrees_with_making_it() {
        use crate::change::Change;
        use crate::model::Inventory;
        use crate::ops::allocations::Requested;
        use crate::ops::claims::NewClaim;
        use crate::testing::{new_provider, pick_claim, rc, tn};
        let mut rng = Rng::new(4444);
        let uuid = |n: u128| Uuid::from_u128(0xf000 + n);
        let member = |n: u128| Uuid::from_u128(0xc0 + n);
        let mut grown = 0;
        for case in 0..400 {
            let mut s = State::new();
            let roots = 2 + rng.below(5) as u64;
            let mut changes = Vec::new();
            for id in 1..=roots {
                changes.push(new_provider(id, uuid(id.into()), None, 0));
                changes.push(Change::SetInventories(
                    ProviderId(id),
                    vec![(rc("VCPU"), Inventory::with_total(1000))],
                ));
                let aggs = [Uuid::from_u128(0xa1), Uuid::from_u128(0xa2)];
                let mut mine: Vec<Uuid> = aggs.into_iter().filter(|_| rng.below(2) == 0).collect();
                mine.sort();
                changes.push(Change::SetAggregates(ProviderId(id), mine));
                let rack = ["CUSTOM_RACK_A", "CUSTOM_RACK_B", "CUSTOM_GOLD"][rng.below(3)];
                changes.push(Change::SetTraits(ProviderId(id), vec![tn(rack)]));
            }
            // A child of the first root, used like the root.
            let child = roots + 1;
            changes.push(new_provider(child, uuid(child.into()), Some(1), 0));
            changes.push(Change::SetInventories(
                ProviderId(child),
                vec![(rc("VCPU"), Inventory::with_total(1000))],
            ));
            s.apply(&changes);
            let on = |provider: u64, consumer: Uuid, n: u128, expires_at| NewClaim {
                allocations: vec![Requested {
                    provider: uuid(provider.into()).into(),
                    class: crate::names::ResourceClass::requested("VCPU"),
                    used: 1,
                }],
                expires_at,
                consumer,
                ..pick_claim(n)
            };
            let mut n = 0;
            for m in 0..5u128 {
                for _ in 0..rng.below(3) {
                    n += 1;
                    let provider = 1 + rng.below(child as usize) as u64;
                    let expires = [None, Some(10), Some(1000)][rng.below(3)];
                    let (made, changes) = s
                        .plan_create_claim(on(provider, member(m), n, expires), 0)
                        .unwrap();
                    s.apply(&changes);
                    if rng.below(2) == 0 {
                        let (_, changes) = s.plan_confirm_claim(&made.uuid, false, 0).unwrap();
                        s.apply(&changes);
                    }
                }
            }
            let policy = [
                Policy::Affinity,
                Policy::AntiAffinity,
                Policy::SoftAffinity,
                Policy::SoftAntiAffinity,
            ][rng.below(4)];
            let scope = [
                Scope::Root,
                Scope::Aggregate,
                Scope::TraitPrefix("CUSTOM_RACK_".into()),
            ][rng.below(3)]
            .clone();
            let r = Rule {
                policy,
                max_per_domain: 1 + rng.below(2) as u32,
                scope,
            };
            let members: Vec<Uuid> = (0..4).map(member).collect();
            let now = [0, 50][rng.below(2)];
            for _ in 0..6 {
                let who = member(rng.below(5) as u128);
                let provider = 1 + rng.below(child as usize) as u64;
                let root = s.provider(ProviderId(provider)).unwrap().row.root;
                let quick = s.claim_breaks(&r, &members, &who, root, now);
                n += 1;
                let (_, changes) = s
                    .plan_create_claim(on(provider, who, n, None), now)
                    .unwrap();
                let mut after = s.clone();
                after.apply(&changes);
                let before = s.group_broken(&r, &members, now);
                let made = after.group_broken(&r, &members, now);
                assert_eq!(quick, made > before, "case {case}: {r:?} {who} on {root:?}");
                grown += usize::from(quick);
            }
        }
        assert!(grown > 100, "the cases grow some groups ({grown})");
    }

    #[test]
    fn names_as_nova_and_headroom_write_them() {
        for p in [
            "affinity",
            "anti-affinity",
            "soft-affinity",
            "soft-anti-affinity",
        ] {
            assert_eq!(Policy::parse(p).unwrap().as_str(), p);
        }
        assert_eq!(Policy::parse("anti_affinity"), None);
        assert!(Policy::AntiAffinity.is_hard() && !Policy::SoftAntiAffinity.is_hard());
        for s in ["root", "aggregate", "trait:CUSTOM_RACK_"] {
            assert_eq!(Scope::parse(s).unwrap().to_string(), s);
        }
        for bad in ["", "host", "trait:", "trait:custom", "trait:A B", "Root"] {
            assert_eq!(Scope::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn how_broken_each_policy_is() {
        let anti = rule(Policy::AntiAffinity, 1);
        assert_eq!(anti.broken(&[vec![root(1)], vec![root(2)], vec![]]), 0);
        assert_eq!(
            anti.broken(&[vec![root(1)], vec![root(1)], vec![root(1)]]),
            2
        );
        let two = rule(Policy::SoftAntiAffinity, 2);
        assert_eq!(
            two.broken(&[vec![root(1)], vec![root(1)], vec![root(1)]]),
            1
        );
        let aff = rule(Policy::Affinity, 1);
        assert_eq!(aff.broken(&[vec![root(1)], vec![root(1)], vec![]]), 0);
        assert_eq!(
            aff.broken(&[vec![root(1)], vec![root(2)], vec![root(2)]]),
            1
        );
        // A member on two roots (its claim spans them) is in each.
        assert_eq!(aff.broken(&[vec![root(1), root(2)], vec![root(2)]]), 0);
        assert_eq!(anti.broken(&[vec![root(1), root(2)], vec![root(2)]]), 1);
        assert_eq!(aff.broken(&[]), 0);
    }

    /// For random members in random domains: 0 exactly when the rule holds as Nova
    /// states it; a member in no domain changes nothing; and a member added where the
    /// rule has room adds nothing, anywhere else at least one.
    #[test]
    fn broken_is_zero_exactly_when_the_rule_holds() {
        let mut rng = Rng::new(44);
        for _ in 0..5000 {
            let policy = [Policy::Affinity, Policy::AntiAffinity][rng.below(2)];
            let r = rule(policy, 1 + rng.below(3) as u32);
            let members: Vec<Vec<Domain>> = (0..rng.below(7))
                .map(|_| {
                    (0..rng.below(3))
                        .map(|_| root(rng.below(4) as u128))
                        .collect()
                })
                .map(|mut d: Vec<Domain>| {
                    d.sort();
                    d.dedup();
                    d
                })
                .collect();
            let count = |d: &Domain| members.iter().filter(|m| m.contains(d)).count();
            let all: Vec<Domain> = (0..4).map(root).collect();
            let holds = if policy.is_anti() {
                all.iter().all(|d| count(d) <= r.max_per_domain as usize)
            } else {
                let placed = members.iter().filter(|m| !m.is_empty()).count();
                placed == 0 || all.iter().any(|d| count(d) == placed)
            };
            let before = r.broken(&members);
            assert_eq!(before == 0, holds, "{r:?} {members:?}");
            let mut more = members.clone();
            more.push(vec![]);
            assert_eq!(r.broken(&more), before);
            // One more member on two domains at once, counted from the tally.
            let two = [root(rng.below(2) as u128), root(2 + rng.below(2) as u128)];
            let mut more = members.clone();
            more.push(two.to_vec());
            let tally = r.tally(members.iter().map(|m| &m[..]));
            assert_eq!(
                tally.broken_with(&two),
                r.broken(&more),
                "{r:?} {members:?}"
            );
            assert_eq!(tally.broken_with(&[]), before);
            for d in &all {
                let mut more = members.clone();
                more.push(vec![d.clone()]);
                let room = if policy.is_anti() {
                    count(d) < r.max_per_domain as usize
                } else {
                    count(d) == all.iter().map(count).max().unwrap_or(0)
                };
                let after = r.broken(&more);
                let tally = r.tally(members.iter().map(|m| &m[..]));
                assert_eq!(tally.broken_with(std::slice::from_ref(d)), after);
                if room {
                    assert_eq!(after, before, "{r:?} {members:?} + {d:?}");
                } else {
                    assert!(after > before, "{r:?} {members:?} + {d:?}");
                }
            }
        }
    }
}
