//! Who holds what across the cloud: the consumers that hold allocations or live
//! pending claims, listed with their totals (`GET /consumers`), and the audit of
//! holdings that no live workload accounts for (`allot audit`).
//!
//! A *holder* is a consumer with allocations, a consumer with live claims, or both: a
//! workload promised resources it has not started holds them as surely as one that
//! runs. Holders are listed in uuid order, which is also how the audit splits a
//! cloud's worth of existing workloads into requests of bounded size: each request
//! covers a range of uuids and says which of them exist, so no request needs another's
//! list and any node can answer any of them.

use std::collections::{BinaryHeap, HashMap};

use uuid::Uuid;

use crate::change::Change;
use crate::error::{ConflictCode, Error};
use crate::model::{Claim, Consumer, ProviderId, Timestamp};
use crate::names::Text;
use crate::ops::Plan;
use crate::state::State;

pub use crate::ops::claims::ByClass;

/// What a holder must hold to be listed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Holding {
    /// Allocations, live claims, or both.
    #[default]
    Any,
    /// Allocations (with or without live claims).
    Allocations,
    /// Live claims (with or without allocations).
    Pending,
    /// Both allocations and live claims.
    Both,
}

/// The filters of `GET /consumers`; each one given must hold.
#[derive(Debug, Clone, Default)]
pub struct HolderFilter {
    /// The holder's project.
    pub project_id: Option<String>,
    /// The holder's user.
    pub user_id: Option<String>,
    /// The holder's consumer type (`None` on a holder: it has none).
    pub consumer_type: Option<String>,
    /// Holds something on this provider.
    pub provider: Option<ProviderId>,
    /// Holds something on a provider of this root's tree.
    pub tree: Option<ProviderId>,
    /// Is a member of this server group.
    pub server_group: Option<Uuid>,
    /// What it holds.
    pub holding: Holding,
}

/// One holder and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The consumer.
    pub uuid: Uuid,
    /// Its project (its record's, else its first live claim's).
    pub project_id: Text,
    /// Its user.
    pub user_id: Text,
    /// Its type, if it has one.
    pub consumer_type: Option<Text>,
    /// The consumer's generation, when it holds allocations.
    pub generation: Option<u64>,
    /// When the consumer record was created, when it holds allocations.
    pub created_at: Option<Timestamp>,
    /// When its allocations last changed, when it holds allocations.
    pub updated_at: Option<Timestamp>,
    /// Its allocations, summed by class.
    pub allocations: ByClass,
    /// Its live claims, summed by class.
    pub pending: ByClass,
    /// The providers it holds anything on, sorted.
    pub providers: Vec<Uuid>,
}

/// The view's holders at `now`: the consumer records and the live claims by consumer.
struct Holders<'s> {
    state: &'s State,
    claims: HashMap<Uuid, Vec<&'s Claim>>,
}

impl<'s> Holders<'s> {
    fn at(state: &'s State, now: Timestamp) -> Self {
        let mut claims: HashMap<Uuid, Vec<&Claim>> = HashMap::new();
        for c in state.claims().filter(|c| c.live(now)) {
            claims.entry(c.consumer).or_default().push(c);
        }
        Holders { state, claims }
    }

    /// Every holder's uuid, each once, in no order.
    fn uuids(&self) -> impl Iterator<Item = Uuid> + '_ {
        let with_records = self
            .state
            .consumers()
            .filter(|c| !c.allocations.is_empty())
            .map(|c| c.row.uuid);
        let claims_only = self
            .claims
            .keys()
            .filter(|u| self.record(u).is_none())
            .copied();
        with_records.chain(claims_only)
    }

    /// The consumer record of a holder with allocations.
    fn record(&self, uuid: &Uuid) -> Option<&'s Consumer> {
        self.state
            .consumer(uuid)
            .filter(|c| !c.allocations.is_empty())
    }

    fn live_claims(&self, uuid: &Uuid) -> &[&'s Claim] {
        self.claims.get(uuid).map_or(&[], Vec::as_slice)
    }

    /// Whether a holder passes `filter`.
    fn passes(&self, uuid: &Uuid, filter: &HolderFilter) -> bool {
        let record = self.record(uuid);
        let claims = self.live_claims(uuid);
        let holding = match filter.holding {
            Holding::Any => true,
            Holding::Allocations => record.is_some(),
            Holding::Pending => !claims.is_empty(),
            Holding::Both => record.is_some() && !claims.is_empty(),
        };
        let (project, user, kind) = match (record, claims.first()) {
            (Some(c), _) => (&c.row.project_id, &c.row.user_id, &c.row.consumer_type),
            (None, Some(c)) => (&c.project_id, &c.user_id, &c.consumer_type),
            (None, None) => return false,
        };
        let same = |want: &Option<String>, have: Option<&Text>| {
            want.as_deref()
                .is_none_or(|w| have.is_some_and(|h| h.as_str() == w))
        };
        holding
            && same(&filter.project_id, Some(project))
            && same(&filter.user_id, Some(user))
            && same(&filter.consumer_type, kind.as_ref())
            && filter
                .server_group
                .is_none_or(|g| self.state.groups_of(uuid).contains(&g))
            && (filter.provider.is_none() && filter.tree.is_none()
                || self.provider_ids(uuid).any(|id| self.on(id, filter)))
    }

    /// Whether provider `id` is the filter's provider and in its tree.
    fn on(&self, id: ProviderId, filter: &HolderFilter) -> bool {
        filter.provider.is_none_or(|p| p == id)
            && filter
                .tree
                .is_none_or(|root| self.state.provider(id).is_some_and(|p| p.row.root == root))
    }

    /// The providers a holder holds anything on (repeats possible).
    fn provider_ids(&self, uuid: &Uuid) -> impl Iterator<Item = ProviderId> + '_ {
        let allocated = self
            .record(uuid)
            .into_iter()
            .flat_map(|c| c.allocations.iter().map(|a| a.provider));
        let promised = self
            .live_claims(uuid)
            .iter()
            .flat_map(|c| c.allocations.iter())
            .filter_map(|a| self.state.provider_by_uuid(&a.provider).map(|p| p.id()));
        allocated.chain(promised)
    }

    /// A holder's entry.
    fn holder(&self, uuid: Uuid) -> Holder {
        let record = self.record(&uuid);
        let claims = self.live_claims(&uuid);
        let mut allocations = ByClass::new();
        for a in record.iter().flat_map(|c| c.allocations.iter()) {
            *allocations.entry(a.class.clone()).or_insert(0) += a.used;
        }
        let mut pending = ByClass::new();
        for a in claims.iter().flat_map(|c| c.allocations.iter()) {
            *pending.entry(a.class.clone()).or_insert(0) += a.amount;
        }
        let mut providers: Vec<Uuid> = self
            .provider_ids(&uuid)
            .map(|id| self.state.uuid_of(id))
            .collect();
        providers.sort_unstable();
        providers.dedup();
        let (project_id, user_id, consumer_type) = match (record, claims.first()) {
            (Some(c), _) => (&c.row.project_id, &c.row.user_id, &c.row.consumer_type),
            (None, Some(c)) => (&c.project_id, &c.user_id, &c.consumer_type),
            (None, None) => unreachable!("a holder has a record or a live claim"),
        };
        Holder {
            uuid,
            project_id: project_id.clone(),
            user_id: user_id.clone(),
            consumer_type: consumer_type.clone(),
            generation: record.map(|c| c.row.generation),
            created_at: record.map(|c| c.row.created_at),
            updated_at: record.map(|c| c.row.updated_at),
            allocations,
            pending,
            providers,
        }
    }
}

/// A range of consumer uuids: from `from` (included) to `to` (excluded); an end left
/// open is the end of all uuids.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UuidRange {
    /// The first uuid in the range, if bounded.
    pub from: Option<Uuid>,
    /// The first uuid past the range, if bounded.
    pub to: Option<Uuid>,
}

impl UuidRange {
    /// Whether `uuid` is in the range.
    pub fn contains(&self, uuid: &Uuid) -> bool {
        self.from.is_none_or(|f| *uuid >= f) && self.to.is_none_or(|t| *uuid < t)
    }
}

/// One consumer `--delete` is asked to remove, as the audit reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leaked {
    /// The consumer.
    pub uuid: Uuid,
    /// Its generation in the report.
    pub generation: u64,
}

/// Why a consumer asked for was left as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeftBecause {
    /// It holds no allocations any more.
    Gone,
    /// Its generation is not the report's: it changed since.
    Changed,
    /// It was created or changed at or after the list of live workloads was taken.
    NewerThanList,
    /// It has live pending claims: a workload on its way.
    LiveClaims,
    /// Its consumer type is not one the removal may touch.
    Type,
}

/// What a removal did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removal {
    /// The consumers removed, in the order asked.
    pub removed: Vec<Uuid>,
    /// The consumers left, and why.
    pub left: Vec<(Uuid, LeftBecause)>,
}

/// How a removal is bounded: the consumer types it may touch, and the share of all
/// holders above which it is refused unless forced.
#[derive(Debug, Clone, PartialEq)]
pub struct RemovalRules {
    /// When the list of live workloads was taken.
    pub listed_at: Timestamp,
    /// The consumer types that may be removed (`None` in the list: untyped ones).
    pub types: Vec<Option<String>>,
    /// The most of all holders one removal may take, from 0 to 1.
    pub max_share: f64,
    /// Whether to remove past `max_share`.
    pub force: bool,
}

impl State {
    /// `GET /consumers`: at most `limit` holders passing `filter`, in uuid order,
    /// after `after` (which need not be a holder any more: a page goes on from where
    /// the last one ended). Costs one pass over the holders, not a sort of them.
    pub fn list_holders(
        &self,
        filter: &HolderFilter,
        now: Timestamp,
        after: Option<&Uuid>,
        limit: usize,
    ) -> Vec<Holder> {
        let holders = Holders::at(self, now);
        // The `limit` smallest uuids past `after`, kept in a heap of that size.
        let mut first: BinaryHeap<Uuid> = BinaryHeap::new();
        for uuid in holders.uuids() {
            let past_page = first.len() >= limit && first.peek().is_some_and(|top| uuid > *top);
            if after.is_some_and(|a| uuid <= *a) || past_page {
                continue;
            }
            if !holders.passes(&uuid, filter) {
                continue;
            }
            first.push(uuid);
            if first.len() > limit {
                first.pop();
            }
        }
        let mut uuids = first.into_vec();
        uuids.sort_unstable();
        uuids.into_iter().map(|u| holders.holder(u)).collect()
    }

    /// The audit: the holders in `range` that are not in `existing` (sorted, the live
    /// workloads of that range), in uuid order; and how many holders the range has.
    pub fn leaked_holders(
        &self,
        range: &UuidRange,
        existing: &[Uuid],
        now: Timestamp,
    ) -> (Vec<Holder>, usize) {
        let holders = Holders::at(self, now);
        let mut in_range = 0;
        let mut leaked: Vec<Uuid> = Vec::new();
        for uuid in holders.uuids().filter(|u| range.contains(u)) {
            in_range += 1;
            if existing.binary_search(&uuid).is_err() {
                leaked.push(uuid);
            }
        }
        leaked.sort_unstable();
        let leaked = leaked.into_iter().map(|u| holders.holder(u)).collect();
        (leaked, in_range)
    }

    /// `--delete`: removes the allocations of each consumer asked for that is still
    /// as the audit reported it, in one write; names each one left and why. Refused
    /// as a whole when it would remove more than `rules.max_share` of all holders,
    /// unless forced.
    pub fn plan_remove_leaked(
        &self,
        asked: &[Leaked],
        rules: &RemovalRules,
        now: Timestamp,
    ) -> Plan<Removal> {
        let holders = Holders::at(self, now);
        let mut removal = Removal::default();
        let mut changes = Vec::new();
        for leaked in asked {
            match self.why_left(&holders, leaked, rules) {
                Some(why) => removal.left.push((leaked.uuid, why)),
                None if removal.removed.contains(&leaked.uuid) => {}
                None => {
                    removal.removed.push(leaked.uuid);
                    changes.push(Change::DeleteConsumer(leaked.uuid));
                }
            }
        }
        let total = holders.uuids().count();
        let share = removal.removed.len() as f64 / total.max(1) as f64;
        if share > rules.max_share && !rules.force {
            return Err(Error::conflict(
                ConflictCode::Other,
                format!(
                    "Removing {} of the {total} consumers that hold resources ({:.1}%) is \
                     more than the share allowed ({:.1}%): a list of live workloads that \
                     misses some would remove theirs. Check the list, or force it.",
                    removal.removed.len(),
                    share * 100.0,
                    rules.max_share * 100.0
                ),
            ));
        }
        Ok((removal, changes))
    }

    /// Why a consumer asked for must be left, if it must.
    fn why_left(
        &self,
        holders: &Holders<'_>,
        leaked: &Leaked,
        rules: &RemovalRules,
    ) -> Option<LeftBecause> {
        let Some(record) = holders.record(&leaked.uuid) else {
            return Some(LeftBecause::Gone);
        };
        let row = &record.row;
        let typed = |t: &Option<String>| t.as_deref() == row.consumer_type.as_deref();
        if row.generation != leaked.generation {
            Some(LeftBecause::Changed)
        } else if row.created_at >= rules.listed_at || row.updated_at >= rules.listed_at {
            Some(LeftBecause::NewerThanList)
        } else if !holders.live_claims(&leaked.uuid).is_empty() {
            Some(LeftBecause::LiveClaims)
        } else if !rules.types.iter().any(typed) {
            Some(LeftBecause::Type)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests;
