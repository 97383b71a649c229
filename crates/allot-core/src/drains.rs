//! Drains (issue 44): a host taken out of service with its consumers moved, as one
//! plan, onto other roots that keep every server group's rule (the maintenance-mode
//! migration oVirt's Pending Resource Manager was built for).
//!
//! A drain's record names its roots, the claims that hold each consumer's target,
//! and the roots it marked `COMPUTE_STATUS_DISABLED`. Until it is deleted (open, or
//! confirmed: the host emptied and in maintenance) its roots take nothing new from
//! allot (claims and picks; Placement's own allocation writes are
//! Nova's, and Nova's service state keeps it off them). The rules that make, confirm
//! and abandon a drain are `crate::ops::drains`'.

use std::collections::BTreeSet;
use std::sync::Arc;

use uuid::Uuid;

use crate::model::{ProviderId, Timestamp};
use crate::state::State;

/// A drain's record.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Drain {
    /// Its id.
    pub uuid: Uuid,
    /// The roots drained (provider uuids), sorted.
    pub roots: Vec<Uuid>,
    /// The roots this drain gave `COMPUTE_STATUS_DISABLED` (they lacked it), which
    /// lose it again when the drain ends.
    pub disabled: Vec<Uuid>,
    /// Each consumer moved and the claim that holds its target, in placing order.
    pub claims: Vec<DrainClaim>,
    /// Open, or confirmed (an abandoned drain is forgotten).
    pub state: DrainState,
    /// When it was made.
    pub created_at: Timestamp,
    /// When it was confirmed.
    pub ended_at: Option<Timestamp>,
}

/// One consumer of a drain and the claim holding its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DrainClaim {
    /// The consumer.
    pub consumer: Uuid,
    /// Its claim.
    pub claim: Uuid,
}

/// Where a drain is in its life. Either way its roots take nothing new from allot
/// until it is deleted: a host drained stays in maintenance once emptied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum DrainState {
    /// Its claims hold the targets.
    Open,
    /// Its claims were confirmed in one write: the consumers moved.
    Confirmed,
}

impl DrainState {
    /// The API's name.
    pub fn as_str(self) -> &'static str {
        match self {
            DrainState::Open => "open",
            DrainState::Confirmed => "confirmed",
        }
    }

    /// The state of an API name.
    pub fn parse(text: &str) -> Option<DrainState> {
        [DrainState::Open, DrainState::Confirmed]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// The drains in the view, and the roots the open ones hold (few: a drain is an
/// operator's act). Shared between versions until a drain changes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Drains {
    records: Arc<Vec<Arc<Drain>>>,
    drained: Arc<BTreeSet<ProviderId>>,
}

impl State {
    /// A drain by uuid.
    pub fn drain(&self, uuid: &Uuid) -> Option<&Drain> {
        self.drains
            .records
            .iter()
            .find(|d| d.uuid == *uuid)
            .map(|d| &**d)
    }

    /// Every drain, oldest first.
    pub fn drains(&self) -> impl Iterator<Item = &Drain> {
        self.drains.records.iter().map(|d| &**d)
    }

    /// Whether `root` is held by a drain (open or confirmed: until it is deleted).
    pub fn is_drained(&self, root: ProviderId) -> bool {
        !self.drains.drained.is_empty() && self.drains.drained.contains(&root)
    }

    /// The open drain whose claim this is, if any.
    pub fn drain_of_claim(&self, claim: &Uuid) -> Option<&Drain> {
        self.drains()
            .filter(|d| d.state == DrainState::Open)
            .find(|d| d.claims.iter().any(|c| c.claim == *claim))
    }

    /// Whether root `root` reaches sharing provider `sharing` through an aggregate
    /// (or is it).
    pub fn reaches(&self, root: ProviderId, sharing: ProviderId) -> bool {
        if root == sharing {
            return true;
        }
        match (self.provider(root), self.provider(sharing)) {
            (Some(r), Some(s)) => r.aggregates.iter().any(|a| s.aggregates.contains(a)),
            _ => false,
        }
    }

    /// The work of `Change::PutDrain`.
    pub(crate) fn upsert_drain(&mut self, drain: &Drain) {
        let records = Arc::make_mut(&mut self.drains.records);
        match records.iter_mut().find(|d| d.uuid == drain.uuid) {
            Some(d) => *d = Arc::new(drain.clone()),
            None => records.push(Arc::new(drain.clone())),
        }
        self.index_drained();
    }

    /// The work of `Change::DeleteDrain`.
    pub(crate) fn remove_drain(&mut self, uuid: &Uuid) {
        Arc::make_mut(&mut self.drains.records).retain(|d| d.uuid != *uuid);
        self.index_drained();
    }

    fn index_drained(&mut self) {
        let drained: BTreeSet<ProviderId> = self
            .drains()
            .flat_map(|d| d.roots.iter())
            .filter_map(|u| self.provider_by_uuid(u))
            .map(|p| p.id())
            .collect();
        self.drains.drained = Arc::new(drained);
    }
}
