//! Server groups in the view (issue 44): the records by uuid, and per member the
//! groups it is in and its pending claims, so that where a member is
//! ([`State::member_roots`]) is read from its own records rather than from every
//! claim.
//!
//! Only members' claims are indexed: an index of every consumer's pending claims
//! cost a `spread` pick a fifth of its writer time (docs/design/server-groups.md).
//! While the view holds a group, it counts the pending claims of every other
//! consumer that has some, a number in a small table (a cloud without groups pays
//! nothing for it): a consumer that joins a group has its claims found by a scan of
//! every claim only if it has some, and a new instance a pick places has none. A
//! store loads groups before claims, so a load scans nothing.

use std::hash::BuildHasher;
use std::sync::Arc;

use uuid::Uuid;

use crate::model::{Claim, ClaimState, ProviderId, Timestamp, NEVER};
use crate::persistent::PHashTable;
use crate::server_groups::ServerGroup;
use crate::state::State;

/// The groups and the members' index. `Arc`s in the tables, so that copying a leaf
/// for a new version counts references instead of copying member lists.
#[derive(Debug, Clone, Default)]
pub(crate) struct Groups {
    by_uuid: PHashTable<Arc<ServerGroup>>,
    members: PHashTable<Arc<Membership>>,
    /// While there is a group: per consumer in none with any, how many claims it
    /// has recorded as pending (live or past their expiry); a member's are in its
    /// entry. Empty while there is no group.
    pending: PHashTable<(Uuid, u32)>,
}

/// What the view keeps of one member.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Membership {
    consumer: Uuid,
    /// The groups it is in, sorted.
    groups: Vec<Uuid>,
    /// Where its claims recorded as pending (live or past their expiry) are, one
    /// entry per claim and provider, sorted.
    claims: Vec<ClaimPlace>,
}

/// One provider of a member's pending claim: what where the member is
/// ([`State::member_roots`]) reads of the claim, in the member's own entry, so that
/// a pick reads no claim record and looks no provider up by uuid for each member
/// of its groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct ClaimPlace {
    claim: Uuid,
    provider: ProviderId,
    /// When the claim expires (`NEVER` if it does not).
    expires_at: Timestamp,
}

/// The places of a pending claim, sorted (its providers exist while it is).
fn places_of(state: &State, claim: &Claim) -> Vec<ClaimPlace> {
    let mut places: Vec<ClaimPlace> = claim
        .allocations
        .iter()
        .filter_map(|a| state.provider_by_uuid(&a.provider))
        .map(|p| ClaimPlace {
            claim: claim.uuid,
            provider: p.id(),
            expires_at: claim.expires_at.unwrap_or(NEVER),
        })
        .collect();
    places.sort_unstable();
    places.dedup();
    places
}

/// `consumer`'s claims recorded as pending, found by reading every claim.
fn scan_pending<'a>(state: &'a State, consumer: &'a Uuid) -> impl Iterator<Item = &'a Claim> {
    state
        .claims()
        .filter(move |c| c.consumer == *consumer && c.state == ClaimState::Pending)
}

/// The places of `consumer`'s pending claims, found by reading every claim, sorted.
fn places_scanned(state: &State, consumer: &Uuid) -> Vec<ClaimPlace> {
    let mut places: Vec<ClaimPlace> = scan_pending(state, consumer)
        .flat_map(|c| places_of(state, c))
        .collect();
    places.sort_unstable();
    places
}

impl State {
    /// A server group by uuid.
    pub fn server_group(&self, uuid: &Uuid) -> Option<&ServerGroup> {
        self.groups
            .by_uuid
            .find(self.hasher.hash_one(uuid), |g| g.uuid == *uuid)
            .map(|g| &**g)
    }

    /// Every server group, in no particular order.
    pub fn server_groups(&self) -> impl Iterator<Item = &ServerGroup> {
        self.groups.by_uuid.iter().map(|g| &**g)
    }

    /// Whether the view holds any server group (most clouds' writes ask this alone).
    pub fn has_server_groups(&self) -> bool {
        !self.groups.by_uuid.is_empty()
    }

    /// The groups `consumer` is a member of, sorted.
    pub fn groups_of(&self, consumer: &Uuid) -> &[Uuid] {
        self.membership(consumer).map_or(&[], |m| &m.groups)
    }

    fn membership(&self, consumer: &Uuid) -> Option<&Membership> {
        if self.groups.members.is_empty() {
            return None;
        }
        self.groups
            .members
            .find(self.hasher.hash_one(consumer), |m| m.consumer == *consumer)
            .map(|m| &**m)
    }

    /// The work of `Change::PutServerGroup`: the record replaced, and members that
    /// joined or left indexed.
    pub(super) fn upsert_server_group(&mut self, group: &ServerGroup) {
        let old: Vec<Uuid> = self
            .server_group(&group.uuid)
            .map(|g| g.members.clone())
            .unwrap_or_default();
        if !self.has_server_groups() {
            self.count_pending_claims();
        }
        self.remove_group_record(&group.uuid);
        let hasher = &self.hasher;
        self.groups.by_uuid.insert_unique(
            hasher.hash_one(group.uuid),
            Arc::new(group.clone()),
            |g| hasher.hash_one(g.uuid),
        );
        for gone in old.iter().filter(|m| !group.has_member(m)) {
            self.leave(gone, &group.uuid);
        }
        for joined in group
            .members
            .iter()
            .filter(|m| old.binary_search(m).is_err())
        {
            self.join(joined, group.uuid);
        }
    }

    /// The work of `Change::JoinServerGroup`: the member added to the record (a copy
    /// of it, if an older version shares it) and indexed.
    pub(super) fn join_server_group(&mut self, group: &Uuid, consumer: &Uuid, at: Timestamp) {
        let hash = self.hasher.hash_one(group);
        let Some(record) = self.groups.by_uuid.find_mut(hash, |g| g.uuid == *group) else {
            return;
        };
        let Err(i) = record.members.binary_search(consumer) else {
            return;
        };
        let record = Arc::make_mut(record);
        record.members.insert(i, *consumer);
        record.updated_at = at;
        self.join(consumer, *group);
    }

    /// The work of `Change::DeleteServerGroup`: the record, and its members' entries.
    pub(super) fn remove_server_group(&mut self, uuid: &Uuid) {
        let members = self
            .server_group(uuid)
            .map(|g| g.members.clone())
            .unwrap_or_default();
        for m in &members {
            self.leave(m, uuid);
        }
        self.remove_group_record(uuid);
        if self.groups.by_uuid.is_empty() {
            self.groups.pending = PHashTable::default();
        }
    }

    /// The counts of pending claims per consumer, from the claims (as the first
    /// group comes).
    fn count_pending_claims(&mut self) {
        let mut counts: Vec<(Uuid, u32)> = self
            .claims()
            .filter(|c| c.state == ClaimState::Pending)
            .map(|c| (c.consumer, 1))
            .collect();
        counts.sort_unstable();
        counts.dedup_by(|next, kept| {
            let same = next.0 == kept.0;
            kept.1 += u32::from(same);
            same
        });
        let hasher = &self.hasher;
        self.groups.pending = PHashTable::from_hashed(
            counts
                .into_iter()
                .map(|c| (hasher.hash_one(c.0), c))
                .collect(),
            |c| hasher.hash_one(c.0),
        );
    }

    /// Appends to `out` the providers of `consumer`'s claims live at `now`, each
    /// claim's once: from its own index for a member, none without a read for a
    /// consumer the counts say has no claim, else found among every claim.
    pub(crate) fn push_live_claim_providers(
        &self,
        consumer: &Uuid,
        now: Timestamp,
        out: &mut Vec<ProviderId>,
    ) {
        match self.membership(consumer) {
            Some(m) => out.extend(
                m.claims
                    .iter()
                    .filter(|c| now < c.expires_at)
                    .map(|c| c.provider),
            ),
            None => out.extend(
                self.pending_claims_of(consumer)
                    .filter(|c| c.live(now))
                    .flat_map(|c| c.allocations.iter())
                    .filter_map(|a| self.provider_by_uuid(&a.provider))
                    .map(|p| p.id()),
            ),
        }
    }

    /// The claims non-member `consumer` has recorded as pending: none without a
    /// read if the counts say so, else found among every claim.
    fn pending_claims_of<'a>(
        &'a self,
        consumer: &'a Uuid,
    ) -> Box<dyn Iterator<Item = &'a Claim> + 'a> {
        let hash = self.hasher.hash_one(consumer);
        let none = self.has_server_groups()
            && self
                .groups
                .pending
                .find(hash, |c| c.0 == *consumer)
                .is_none();
        if none {
            return Box::new(std::iter::empty());
        }
        Box::new(scan_pending(self, consumer))
    }

    fn remove_group_record(&mut self, uuid: &Uuid) {
        let hasher = &self.hasher;
        self.groups.by_uuid.remove(
            hasher.hash_one(uuid),
            |g| g.uuid == *uuid,
            |g| hasher.hash_one(g.uuid),
        );
    }

    fn join(&mut self, consumer: &Uuid, group: Uuid) {
        let hash = self.hasher.hash_one(consumer);
        if let Some(m) = self
            .groups
            .members
            .find_mut(hash, |m| m.consumer == *consumer)
        {
            let m = Arc::make_mut(m);
            if let Err(at) = m.groups.binary_search(&group) {
                m.groups.insert(at, group);
            }
            return;
        }
        // Its claims move from the counts into its entry: found by a scan only if
        // it has some (a new instance a pick places has none).
        let hasher = &self.hasher;
        let counted =
            self.groups
                .pending
                .remove(hash, |c| c.0 == *consumer, |c| hasher.hash_one(c.0));
        let claims = match counted {
            Some(_) => places_scanned(self, consumer),
            None => Vec::new(),
        };
        let hasher = &self.hasher;
        self.groups.members.insert_unique(
            hash,
            Arc::new(Membership {
                consumer: *consumer,
                groups: vec![group],
                claims,
            }),
            |m| hasher.hash_one(m.consumer),
        );
    }

    fn leave(&mut self, consumer: &Uuid, group: &Uuid) {
        let hasher = &self.hasher;
        let hash = hasher.hash_one(consumer);
        let Some(m) = self
            .groups
            .members
            .find_mut(hash, |m| m.consumer == *consumer)
        else {
            return;
        };
        let m = Arc::make_mut(m);
        m.groups.retain(|g| g != group);
        if !m.groups.is_empty() {
            return;
        }
        let claims = m.claims.chunk_by(|a, b| a.claim == b.claim).count() as u32;
        self.groups.members.remove(
            hash,
            |m| m.consumer == *consumer,
            |m| hasher.hash_one(m.consumer),
        );
        // No longer a member: its claims are counted again.
        if claims > 0 {
            let counts = &mut self.groups.pending;
            counts.insert_unique(hash, (*consumer, claims), |c| hasher.hash_one(c.0));
        }
    }

    /// Keeps a member's claim list, or a non-member's count of pending claims,
    /// exact as a claim is recorded (`pending`: it is recorded pending) or removed:
    /// called by the claims' own index upkeep.
    pub(super) fn note_claim(&mut self, claim: &Claim, pending: bool) {
        if !self.has_server_groups() {
            return;
        }
        let hasher = &self.hasher;
        let hash = hasher.hash_one(claim.consumer);
        let Some(m) = self.membership(&claim.consumer) else {
            let counts = &mut self.groups.pending;
            match (counts.find_mut(hash, |c| c.0 == claim.consumer), pending) {
                (Some(count), true) => count.1 += 1,
                (None, true) => {
                    counts.insert_unique(hash, (claim.consumer, 1), |c| hasher.hash_one(c.0))
                }
                (Some(count), false) if count.1 > 1 => count.1 -= 1,
                (Some(_), false) => {
                    counts.remove(hash, |c| c.0 == claim.consumer, |c| hasher.hash_one(c.0));
                }
                (None, false) => {}
            }
            return;
        };
        let at = m.claims.partition_point(|p| p.claim < claim.uuid);
        let held = m.claims[at..].partition_point(|p| p.claim == claim.uuid);
        let places = match (held, pending) {
            (0, true) => places_of(self, claim),
            (1.., false) => Vec::new(),
            _ => return,
        };
        let m = self
            .groups
            .members
            .find_mut(hash, |m| m.consumer == claim.consumer)
            .map(Arc::make_mut)
            .expect("a member's entry, found above");
        m.claims.splice(at..at + held, places);
    }

    /// Recomputes the members' index and the counts of pending claims from the
    /// groups and the claims and compares them with those `apply` keeps. For tests: they must always agree.
    pub fn check_group_index(&self) -> bool {
        let mut fresh: Vec<Membership> = Vec::new();
        for g in self.server_groups() {
            for m in &g.members {
                match fresh.iter_mut().find(|f| f.consumer == *m) {
                    Some(f) => f.groups.push(g.uuid),
                    None => fresh.push(Membership {
                        consumer: *m,
                        groups: vec![g.uuid],
                        claims: places_scanned(self, m),
                    }),
                }
            }
        }
        for f in &mut fresh {
            f.groups.sort_unstable();
        }
        let mut counts: Vec<(Uuid, u32)> = Vec::new();
        if self.has_server_groups() {
            let pending = self.claims().filter(|c| c.state == ClaimState::Pending);
            for c in pending.filter(|c| self.membership(&c.consumer).is_none()) {
                match counts.iter_mut().find(|n| n.0 == c.consumer) {
                    Some(n) => n.1 += 1,
                    None => counts.push((c.consumer, 1)),
                }
            }
        }
        let counted = |&(consumer, n): &(Uuid, u32)| {
            let hash = self.hasher.hash_one(consumer);
            self.groups.pending.find(hash, |c| c.0 == consumer) == Some(&(consumer, n))
        };
        fresh.len() == self.groups.members.len()
            && fresh
                .iter()
                .all(|f| self.membership(&f.consumer) == Some(f))
            && counts.len() == self.groups.pending.len()
            && counts.iter().all(counted)
    }
}
