//! Server groups in the view (issue 44): the records by uuid, and per member the
//! groups it is in and its pending claims, so that where a member is
//! ([`State::member_roots`]) is read from its own records rather than from every
//! claim.
//!
//! Only members' claims are indexed: an index of every consumer's pending claims
//! cost a `spread` pick a fifth of its writer time (docs/design/server-groups.md).
//! A consumer that joins a group has its claims found once, by a scan of the claims
//! (a store loads groups before claims, so a load scans nothing).

use std::hash::BuildHasher;
use std::sync::Arc;

use uuid::Uuid;

use crate::model::{Claim, ClaimState};
use crate::persistent::PHashTable;
use crate::server_groups::ServerGroup;
use crate::state::State;

/// The groups and the members' index. `Arc`s in the tables, so that copying a leaf
/// for a new version counts references instead of copying member lists.
#[derive(Debug, Clone, Default)]
pub(crate) struct Groups {
    by_uuid: PHashTable<Arc<ServerGroup>>,
    members: PHashTable<Arc<Membership>>,
}

/// What the view keeps of one member.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Membership {
    consumer: Uuid,
    /// The groups it is in, sorted.
    groups: Vec<Uuid>,
    /// Its claims recorded as pending (live or past their expiry), sorted.
    claims: Vec<Uuid>,
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

    /// The claims of member `consumer` recorded as pending; None if it is in no
    /// group (its claims are not indexed).
    pub(crate) fn member_claims(&self, consumer: &Uuid) -> Option<&[Uuid]> {
        self.membership(consumer).map(|m| &m.claims[..])
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
        let mut claims: Vec<Uuid> = self
            .claims()
            .filter(|c| c.consumer == *consumer && c.state == ClaimState::Pending)
            .map(|c| c.uuid)
            .collect();
        claims.sort_unstable();
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
        if m.groups.is_empty() {
            self.groups.members.remove(
                hash,
                |m| m.consumer == *consumer,
                |m| hasher.hash_one(m.consumer),
            );
        }
    }

    /// Keeps a member's claim list exact as a claim is recorded (`pending`: it is
    /// recorded pending) or removed: called by the claims' own index upkeep.
    pub(super) fn note_member_claim(&mut self, claim: &Claim, pending: bool) {
        if self.groups.members.is_empty() {
            return;
        }
        let hash = self.hasher.hash_one(claim.consumer);
        let Some(m) = self
            .groups
            .members
            .find_mut(hash, |m| m.consumer == claim.consumer)
        else {
            return;
        };
        let at = m.claims.binary_search(&claim.uuid);
        match (at, pending) {
            (Err(at), true) => Arc::make_mut(m).claims.insert(at, claim.uuid),
            (Ok(at), false) => {
                Arc::make_mut(m).claims.remove(at);
            }
            _ => {}
        }
    }

    /// Recomputes the members' index from the groups and the claims and compares it
    /// with the one `apply` keeps. For tests: they must always agree.
    pub fn check_group_index(&self) -> bool {
        let mut fresh: Vec<Membership> = Vec::new();
        for g in self.server_groups() {
            for m in &g.members {
                match fresh.iter_mut().find(|f| f.consumer == *m) {
                    Some(f) => f.groups.push(g.uuid),
                    None => fresh.push(Membership {
                        consumer: *m,
                        groups: vec![g.uuid],
                        claims: self
                            .claims()
                            .filter(|c| c.consumer == *m && c.state == ClaimState::Pending)
                            .map(|c| c.uuid)
                            .collect(),
                    }),
                }
            }
        }
        for f in &mut fresh {
            f.groups.sort_unstable();
            f.claims.sort_unstable();
        }
        fresh.len() == self.groups.members.len()
            && fresh
                .iter()
                .all(|f| self.membership(&f.consumer) == Some(f))
    }
}
