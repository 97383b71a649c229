//! Allocations: the claims consumers hold on providers, written atomically for one or
//! many consumers at once and never beyond capacity.
//!
//! [`State::plan_allocations`] is the one rule every allocation write goes through
//! (`PUT /allocations/{c}`, `POST /allocations`, the reshaper). It takes the finished,
//! typed write each endpoint builds from its body (one [`ConsumerWrite`] per consumer:
//! owner, type, generation check and amounts, each provider as the request spelled
//! it) and the [`Endpoint`], which only chooses the wording of refusals. It replaces
//! the allocations of every consumer it names, all or nothing, checking in
//! Placement's order (which decides the error a request that is wrong in several
//! ways gets), each check once:
//!
//! 1. every consumer's generation, when the caller asks for the check (1.28);
//! 2. every provider named exists (by the text the request gives: only the canonical
//!    spelling of a uuid names one, see [`ProviderRef`]);
//! 3. every resource class named exists;
//! 4. every provider involved has inventory of at least one of the classes involved;
//! 5. allocation by allocation, in request order: the provider has inventory of the
//!    class, the amount respects its `min_unit`, `max_unit` and `step_size`, and what
//!    is used afterwards (by everyone) fits in `(total - reserved) * allocation_ratio`,
//!    unless it is no more than was used before the write (a write may leave an
//!    already over-committed inventory no worse, as Placement allows, so that
//!    operators can shrink inventory and consumers can still move off it).
//!
//! Then, as Placement's `_set_allocations` does:
//!
//! - a consumer is *touched* when it gets allocations, or when it is emptied (its
//!   new allocations are empty) while it held some. Touched consumers have their
//!   generation bumped; a touched consumer left with nothing is deleted. A consumer
//!   that held nothing and gets nothing is only created (or has its project, user and
//!   type updated): Placement creates the consumer record before writing allocations
//!   and keeps it, at generation 0, so that a later write must name generation 0.
//! - every provider that receives an allocation, and every provider an emptied
//!   consumer releases, has its generation bumped. (A consumer whose allocations are
//!   replaced by others does not bump the providers it leaves, as in Placement.)
//!
//! Because the host serialises writes, the usage the checks see is the usage the
//! changes apply to: two claims can never together exceed capacity. Placement retries
//! a write that lost a race on a provider generation (`allocation_conflict_retry_count`);
//! under our single writer such a race cannot happen, so there is nothing to retry.
//!
//! [`State::delete_allocations`] is `DELETE /allocations/{c}`, which in Placement is
//! a plain delete: it bumps no generation.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use uuid::Uuid;

use super::placing::{merged, place, Unfit};
use super::server_groups::Enforced;
use super::{bump, Plan};
use crate::change::Change;
use crate::error::{ConflictCode, Error};
use crate::model::{Allocation, Consumer, ConsumerRow, Provider, ProviderId, Timestamp};
use crate::names::{ProviderRef, RequestedName, ResourceClass};
use crate::state::State;

/// The project and user Placement gives consumers written without them (before 1.8):
/// its `incomplete_consumer_project_id` and `incomplete_consumer_user_id` defaults.
pub const INCOMPLETE_CONSUMER_ID: &str = "00000000-0000-0000-0000-000000000000";

/// The consumer type Placement shows for consumers that have none (written before
/// 1.38).
pub const UNKNOWN_CONSUMER_TYPE: &str = "unknown";

/// Which endpoint a write comes from. They refuse the same things, but Placement's
/// handlers word some refusals differently (an unknown class, mostly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `PUT /allocations/{consumer}`.
    Put,
    /// `POST /allocations` (1.13).
    Post,
    /// `POST /reshaper` (1.30).
    Reshaper,
}

/// What a write expects of a consumer's generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGeneration {
    /// No check (microversions before 1.28).
    Unchecked,
    /// The consumer must not exist yet (`consumer_generation: null`).
    New,
    /// The consumer must exist at this generation. Any JSON integer the request gave
    /// (`i64` and `u64` both fit), because Placement's conflict message repeats it as
    /// given, a negative one included; such a one matches no consumer.
    Is(i128),
}

impl ConsumerGeneration {
    /// Whether a consumer at `actual` (None: no such consumer) passes the check.
    fn admits(&self, actual: Option<u64>) -> bool {
        match (self, actual) {
            (ConsumerGeneration::Unchecked, _) | (ConsumerGeneration::New, None) => true,
            (ConsumerGeneration::Is(g), Some(a)) => *g == i128::from(a),
            _ => false,
        }
    }

    /// The generation as Placement's conflict message shows what the client gave.
    fn shown(&self) -> String {
        match self {
            ConsumerGeneration::Unchecked | ConsumerGeneration::New => "None".into(),
            ConsumerGeneration::Is(g) => g.to_string(),
        }
    }
}

/// One amount a consumer asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requested {
    /// The provider, as the request named it.
    pub provider: ProviderRef,
    /// The class, as the request named it: text that is no class name is refused as
    /// an unknown class, at the same step.
    pub class: RequestedName<ResourceClass>,
    /// How much (0 means "nothing", and is dropped).
    pub used: u64,
}

/// Everything one consumer should hold after the write, as the request gave it: the
/// finished, typed form of one consumer's part of a body, which every endpoint
/// builds and the rule takes as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerWrite {
    /// The consumer.
    pub consumer: Uuid,
    /// The owning project.
    pub project_id: String,
    /// The owning user.
    pub user_id: String,
    /// The consumer type (1.38); None keeps the existing one, or none for a new one.
    pub consumer_type: Option<String>,
    /// The generation check.
    pub generation: ConsumerGeneration,
    /// The complete new allocations, in request order; empty removes them all (and
    /// the consumer).
    pub allocations: Vec<Requested>,
}

/// Why an allocation write was refused; [`Refusal::word`] turns it into the error
/// the endpoint gives (Placement's handlers wrap the same failures differently).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Refusal {
    /// A consumer generation did not match (409, concurrent update).
    ConsumerGeneration {
        /// Its generation, None if it does not exist.
        actual: Option<u64>,
        /// What the request said.
        given: ConsumerGeneration,
    },
    /// A provider does not exist (400).
    UnknownProvider(ProviderRef),
    /// A resource class does not exist (400).
    UnknownClass {
        /// The consumer asking for it.
        consumer: Uuid,
        /// The class, as the request named it.
        class: RequestedName<ResourceClass>,
    },
    /// Some providers have no inventory of any class the write involves (409):
    /// the classes and the providers, each joined with ", ".
    NoInventory {
        /// The classes of the write.
        classes: String,
        /// The providers without any of them.
        providers: String,
    },
    /// A provider has no inventory of a class asked of it (409).
    MissingInventory {
        /// The class.
        class: ResourceClass,
        /// The provider.
        provider: Uuid,
    },
    /// An amount breaks `min_unit`, `max_unit` or `step_size` (409).
    ConstraintsViolated {
        /// The class.
        class: ResourceClass,
        /// The provider.
        provider: Uuid,
    },
    /// The write would exceed a capacity (409).
    CapacityExceeded {
        /// The class.
        class: ResourceClass,
        /// The provider.
        provider: Uuid,
    },
    /// The same consumer twice in one write (a caller's mistake; 400).
    DuplicateConsumer(Uuid),
}

impl Refusal {
    /// The error `endpoint` answers with. The failures of Placement's inventory
    /// family (its `InvalidInventory` exceptions) read the same everywhere, after
    /// "Unable to allocate inventory: "; an unknown class reads differently at each
    /// endpoint.
    fn word(self, endpoint: Endpoint) -> Error {
        let inventory = |detail: String| {
            Error::conflict(
                ConflictCode::Other,
                format!("Unable to allocate inventory: {detail}"),
            )
        };
        match self {
            Refusal::ConsumerGeneration { actual, given } => Error::conflict(
                ConflictCode::ConcurrentUpdate,
                format!(
                    "consumer generation conflict - expected {} but got {}",
                    actual.map_or("null".to_owned(), |g| g.to_string()),
                    given.shown()
                ),
            ),
            Refusal::UnknownProvider(provider) => Error::invalid(format!(
                "Allocation for resource provider '{provider}' that does not exist."
            )),
            Refusal::UnknownClass { consumer, class } => Error::invalid(match endpoint {
                Endpoint::Put => format!(
                    "Unable to allocate inventory for consumer {consumer}: No such resource \
                     class {class}."
                ),
                Endpoint::Post => {
                    format!("Unable to allocate inventory No such resource class {class}.")
                }
                Endpoint::Reshaper => {
                    format!("malformed reshaper data: No such resource class {class}.")
                }
            }),
            Refusal::DuplicateConsumer(uuid) => {
                Error::invalid(format!("Consumer {uuid} appears more than once."))
            }
            Refusal::NoInventory { classes, providers } => inventory(format!(
                "Inventory for '{classes}' on resource provider '{providers}' invalid."
            )),
            Refusal::MissingInventory { class, provider } => inventory(format!(
                "Inventory for '{class}' on resource provider '{provider}' invalid."
            )),
            Refusal::ConstraintsViolated { class, provider } => inventory(format!(
                "Unable to create allocation for '{class}' on resource provider '{provider}'. \
                 The requested amount would violate inventory constraints."
            )),
            Refusal::CapacityExceeded { class, provider } => inventory(format!(
                "Unable to create allocation for '{class}' on resource provider '{provider}'. \
                 The requested amount would exceed the capacity."
            )),
        }
    }
}

/// One consumer's allocations on one provider, for the GETs.
#[derive(Debug, Clone)]
pub struct Held<'a> {
    /// The provider.
    pub provider: &'a Provider,
    /// Amounts by class.
    pub resources: Vec<(&'a ResourceClass, u64)>,
}

impl State {
    /// Plans an allocation write: replaces the allocations of every consumer in
    /// `writes`, atomically, with every check in Placement's order and `endpoint`'s
    /// wording of refusals (see the module doc for the rules). The one rule every
    /// allocation write goes through.
    pub fn plan_allocations(
        &self,
        writes: &[ConsumerWrite],
        endpoint: Endpoint,
        now: Timestamp,
    ) -> Plan<()> {
        let planned = worded(self.plan_refusable(writes, now), endpoint)?;
        // Server groups made with `enforce_on_allocations` answer for these too.
        if self.has_server_groups() {
            let placed: Vec<Uuid> = writes.iter().map(|w| w.consumer).collect();
            self.kept_after(&planned.1, &placed, Enforced::OnAllocations, now)?;
        }
        Ok(planned)
    }

    /// The first checks of [`State::plan_allocations`] (1 and 2: consumer
    /// generations, providers), for the reshaper, which makes them before its interim
    /// inventories and plans the rest with [`State::plan_checked_allocations`] against
    /// the state those leave.
    pub(crate) fn check_allocation_targets(
        &self,
        writes: &[ConsumerWrite],
        endpoint: Endpoint,
    ) -> crate::Result<()> {
        self.check_targets(writes)
            .map_err(|refusal| refusal.word(endpoint))
    }

    /// The rest of [`State::plan_allocations`] (3 to 5, and the changes), for writes
    /// whose targets [`State::check_allocation_targets`] accepted.
    pub(crate) fn plan_checked_allocations(
        &self,
        writes: &[ConsumerWrite],
        endpoint: Endpoint,
        now: Timestamp,
    ) -> Plan<()> {
        worded(self.plan_checked(writes, now), endpoint)
    }

    /// Every check and the changes, with a refusal not yet worded.
    fn plan_refusable(
        &self,
        writes: &[ConsumerWrite],
        now: Timestamp,
    ) -> Result<Vec<Change>, Refusal> {
        self.check_targets(writes)?;
        self.plan_checked(writes, now)
    }

    /// Each consumer once; 1. generations; 2. providers, in request order.
    fn check_targets(&self, writes: &[ConsumerWrite]) -> Result<(), Refusal> {
        let mut seen = HashSet::new();
        if let Some(dup) = writes.iter().find(|w| !seen.insert(w.consumer)) {
            return Err(Refusal::DuplicateConsumer(dup.consumer));
        }
        for write in writes {
            let actual = self.consumer(&write.consumer).map(|c| c.row.generation);
            if !write.generation.admits(actual) {
                return Err(Refusal::ConsumerGeneration {
                    actual,
                    given: write.generation,
                });
            }
        }
        for r in writes.iter().flat_map(|w| &w.allocations) {
            if self.provider_by_ref(&r.provider).is_none() {
                return Err(Refusal::UnknownProvider(r.provider.clone()));
            }
        }
        Ok(())
    }

    /// 3 to 5, and the changes, for writes [`State::check_targets`] accepted: one
    /// call per check, in Placement's order (which decides the error a request that
    /// is wrong in several ways gets).
    fn plan_checked(
        &self,
        writes: &[ConsumerWrite],
        now: Timestamp,
    ) -> Result<Vec<Change>, Refusal> {
        let providers = self.providers_named(writes)?;
        let asked = self.check_classes(writes, merged_requests(writes))?;
        let (held_before, released) = self.held_and_released(writes, &asked);
        self.check_some_inventory(&providers, &asked, &released)?;
        check_each_allocation(&providers, &asked, &held_before, now)?;
        Ok(self.allocation_changes(writes, &asked, &providers, now))
    }

    /// The providers the writes name, by uuid (all exist: [`State::check_targets`]
    /// checked).
    fn providers_named(
        &self,
        writes: &[ConsumerWrite],
    ) -> Result<HashMap<Uuid, &Provider>, Refusal> {
        let mut providers: HashMap<Uuid, &Provider> = HashMap::new();
        for r in writes.iter().flat_map(|w| &w.allocations) {
            let p = self
                .provider_by_ref(&r.provider)
                .ok_or_else(|| Refusal::UnknownProvider(r.provider.clone()))?;
            providers.insert(p.uuid(), p);
        }
        Ok(providers)
    }

    /// Check 3, classes: every class each consumer asks for (see
    /// [`merged_requests`]) is a known name, which it is from here on.
    fn check_classes<'w>(
        &self,
        writes: &[ConsumerWrite],
        asked: Vec<Vec<Merged<'w>>>,
    ) -> Result<Vec<Vec<Asked<'w>>>, Refusal> {
        let mut known: Vec<Vec<Asked<'w>>> = Vec::with_capacity(asked.len());
        for (write, list) in writes.iter().zip(&asked) {
            let mut classes = Vec::with_capacity(list.len());
            for &((provider, class), used) in list {
                let Some(name) = self.known_class(class) else {
                    return Err(Refusal::UnknownClass {
                        consumer: write.consumer,
                        class: class.clone(),
                    });
                };
                classes.push((provider, name, used));
            }
            known.push(classes);
        }
        Ok(known)
    }

    /// What the written consumers hold now, by provider and class, and what the
    /// emptied ones release (Placement carries those as zero amounts through its
    /// checks).
    fn held_and_released(
        &self,
        writes: &[ConsumerWrite],
        asked: &[Vec<Asked<'_>>],
    ) -> (HeldBefore<'_>, Vec<(ProviderId, &ResourceClass)>) {
        let mut held_before: HeldBefore<'_> = HashMap::new();
        let mut released: Vec<(ProviderId, &ResourceClass)> = Vec::new();
        for (write, list) in writes.iter().zip(asked) {
            if let Some(c) = self.consumer(&write.consumer) {
                for a in &c.allocations {
                    *held_before
                        .entry((a.provider, a.class.as_str()))
                        .or_insert(0) += a.used;
                    if list.is_empty() {
                        released.push((a.provider, &a.class));
                    }
                }
            }
        }
        (held_before, released)
    }

    /// Check 4: every provider involved (asked of, or released by an emptied
    /// consumer) has inventory of some class involved.
    fn check_some_inventory(
        &self,
        providers: &HashMap<Uuid, &Provider>,
        asked: &[Vec<Asked<'_>>],
        released: &[(ProviderId, &ResourceClass)],
    ) -> Result<(), Refusal> {
        let mut classes: Vec<&ResourceClass> = Vec::new();
        let mut involved: Vec<&Provider> = Vec::new();
        let released_pairs = released
            .iter()
            .filter_map(|(id, c)| self.provider(*id).map(|p| (p, *c)));
        for (p, c) in asked
            .iter()
            .flatten()
            .map(|(p, c, _)| (providers[p], *c))
            .chain(released_pairs)
        {
            if !classes.contains(&c) {
                classes.push(c);
            }
            if !involved.iter().any(|q| q.id() == p.id()) {
                involved.push(p);
            }
        }
        let missing: Vec<String> = involved
            .iter()
            .filter(|p| {
                !classes
                    .iter()
                    .any(|c| p.inventories.contains_key(c.as_str()))
            })
            .map(|p| p.uuid().to_string())
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let rank: HashMap<&str, usize> = self
            .class_names()
            .enumerate()
            .map(|(i, c)| (c, i))
            .collect();
        classes.sort_by_key(|c| rank.get(c.as_str()).copied().unwrap_or(usize::MAX));
        let names: Vec<&str> = classes.iter().map(|c| c.as_str()).collect();
        Err(Refusal::NoInventory {
            classes: names.join(", "),
            providers: missing.join(", "),
        })
    }

    /// The changes of writes every check accepted: the written consumers' rows and
    /// allocations (or their deletion), then the bumps of the providers touched, in
    /// the order they were first touched (see the module doc for which).
    fn allocation_changes(
        &self,
        writes: &[ConsumerWrite],
        asked: &[Vec<Asked<'_>>],
        providers: &HashMap<Uuid, &Provider>,
        now: Timestamp,
    ) -> Vec<Change> {
        let mut changes = Vec::new();
        let mut bumped: BTreeSet<ProviderId> = BTreeSet::new();
        let mut bump_order: Vec<ProviderId> = Vec::new();
        let mut touch_provider = |id: ProviderId| {
            if bumped.insert(id) {
                bump_order.push(id);
            }
        };
        for (write, list) in writes.iter().zip(asked) {
            let existing = self.consumer(&write.consumer);
            let held = existing.is_some_and(|c| !c.allocations.is_empty());
            let touched = !list.is_empty() || held;
            let mut allocations: BTreeMap<(ProviderId, &ResourceClass), u64> = BTreeMap::new();
            for &(uuid, class, used) in list {
                let id = providers[&uuid].id();
                *allocations.entry((id, class)).or_insert(0) += used;
                touch_provider(id);
            }
            if list.is_empty() {
                for a in existing.map(|c| &*c.allocations).unwrap_or(&[]) {
                    touch_provider(a.provider);
                }
            }
            let row = consumer_row(existing, write, touched, now);
            let previous_generation = existing.map(|c| c.row.generation);
            if touched && list.is_empty() {
                changes.push(Change::DeleteConsumer(write.consumer));
                continue;
            }
            if existing.map(|c| &c.row) != Some(&row) {
                changes.push(Change::PutConsumer {
                    row,
                    previous_generation,
                });
            }
            if touched {
                let list = allocations
                    .into_iter()
                    .map(|((provider, class), used)| Allocation {
                        provider,
                        class: class.clone(),
                        used,
                    })
                    .collect();
                changes.push(Change::SetAllocations(write.consumer, list));
            }
        }
        for id in bump_order {
            if let Some(p) = self.provider(id) {
                changes.push(bump(p, now));
            }
        }
        changes
    }

    /// `DELETE /allocations/{consumer}`: removes everything a consumer holds, and the
    /// consumer. Like Placement, bumps no generation.
    pub fn delete_allocations(&self, consumer: &Uuid) -> Plan<()> {
        match self.consumer(consumer) {
            Some(c) if !c.allocations.is_empty() => {
                Ok(((), vec![Change::DeleteConsumer(*consumer)]))
            }
            _ => Err(Error::not_found(format!(
                "No allocations for consumer '{consumer}'"
            ))),
        }
    }

    /// A consumer's allocations grouped by provider (providers in creation order,
    /// classes by name); empty for an unknown consumer or one that holds nothing.
    pub fn consumer_allocations(&self, consumer: &Uuid) -> Vec<Held<'_>> {
        let Some(c) = self.consumer(consumer) else {
            return Vec::new();
        };
        let mut out: Vec<Held<'_>> = Vec::new();
        // Allocations are kept sorted by provider, then class.
        for a in &c.allocations {
            let Some(provider) = self.provider(a.provider) else {
                continue;
            };
            match out.last_mut() {
                Some(h) if h.provider.id() == a.provider => h.resources.push((&a.class, a.used)),
                _ => out.push(Held {
                    provider,
                    resources: vec![(&a.class, a.used)],
                }),
            }
        }
        out
    }

    /// The consumers holding allocations on a provider, each with its amounts there
    /// by class.
    pub fn provider_allocations(
        &self,
        provider: ProviderId,
    ) -> Vec<(&Consumer, Vec<(&ResourceClass, u64)>)> {
        let Some(index) = self.provider_usage_index(provider) else {
            return Vec::new();
        };
        index
            .consumers
            .iter()
            .filter_map(|uuid| self.consumer(uuid))
            .map(|c| {
                let amounts = c
                    .allocations
                    .iter()
                    .filter(|a| a.provider == provider)
                    .map(|a| (&a.class, a.used))
                    .collect();
                (c, amounts)
            })
            .collect()
    }
}

/// One consumer's request for one class on one provider, merged (see
/// [`merged_requests`]), the class still as the request named it.
type Merged<'w> = ((Uuid, &'w RequestedName<ResourceClass>), u64);

/// One consumer's request for one class on one provider, once its class is known
/// (check 3): provider, class, amount.
type Asked<'w> = (Uuid, &'w ResourceClass, u64);

/// What the written consumers held before the write, by provider and class.
type HeldBefore<'s> = HashMap<(ProviderId, &'s str), u64>;

/// What each consumer asks for, merged by provider and class (first position kept),
/// zero amounts dropped. An empty list empties the consumer.
fn merged_requests(writes: &[ConsumerWrite]) -> Vec<Vec<Merged<'_>>> {
    writes
        .iter()
        .map(|w| {
            let named = w
                .allocations
                .iter()
                .filter_map(|r| Some(((r.provider.uuid()?, &r.class), r.used)));
            merged(named, |a, b| a == b)
        })
        .collect()
}

/// Check 5: inventory, constraints and capacity, allocation by allocation in
/// request order; the first that does not fit is the refusal.
fn check_each_allocation(
    providers: &HashMap<Uuid, &Provider>,
    asked: &[Vec<Asked<'_>>],
    held_before: &HeldBefore<'_>,
    now: Timestamp,
) -> Result<(), Refusal> {
    let mut needed: HashMap<(ProviderId, &str), u64> = HashMap::new();
    for &(uuid, class, used) in asked.iter().flatten() {
        let provider = providers[&uuid];
        let key = (provider.id(), class.as_str());
        // What is used now counts live pending claims (see `super::claims`); what
        // the written consumers held is replaced, what they ask for is added.
        let after = |before: u64| {
            let others = before.saturating_sub(held_before.get(&key).copied().unwrap_or(0));
            let all = needed.entry(key).or_insert(0);
            *all = all.saturating_add(used);
            i128::from(others.saturating_add(*all))
        };
        place(provider, class, used, now, after).map_err(|unfit| {
            let (class, provider) = (class.clone(), uuid);
            match unfit {
                Unfit::NoInventory => Refusal::MissingInventory { class, provider },
                Unfit::Misfit(_) => Refusal::ConstraintsViolated { class, provider },
                Unfit::OverCapacity { .. } => Refusal::CapacityExceeded { class, provider },
            }
        })?;
    }
    Ok(())
}

/// A plan whose refusal, if any, is worded as `endpoint` words it.
fn worded(planned: Result<Vec<Change>, Refusal>, endpoint: Endpoint) -> Plan<()> {
    planned
        .map(|changes| ((), changes))
        .map_err(|refusal| refusal.word(endpoint))
}

/// The consumer's row after the write.
fn consumer_row(
    existing: Option<&Consumer>,
    write: &ConsumerWrite,
    touched: bool,
    now: Timestamp,
) -> ConsumerRow {
    let bump = u64::from(touched);
    match existing {
        Some(c) => ConsumerRow {
            project_id: write.project_id.as_str().into(),
            user_id: write.user_id.as_str().into(),
            consumer_type: write
                .consumer_type
                .as_deref()
                .map(Into::into)
                .or_else(|| c.row.consumer_type.clone()),
            generation: c.row.generation + bump,
            updated_at: if touched { now } else { c.row.updated_at },
            ..c.row.clone()
        },
        None => ConsumerRow {
            uuid: write.consumer,
            project_id: write.project_id.as_str().into(),
            user_id: write.user_id.as_str().into(),
            consumer_type: write.consumer_type.as_deref().map(Into::into),
            generation: bump,
            created_at: now,
            updated_at: now,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Inventory;
    use crate::testing::{new_provider, rc};

    fn vcpu() -> ResourceClass {
        ResourceClass::new_unchecked("VCPU")
    }

    fn add_provider(s: &mut State, n: u64, inventories: Vec<(&str, Inventory)>) {
        s.apply(&[
            new_provider(n, Uuid::from_u128(n as u128), None, 0),
            Change::SetInventories(
                ProviderId(n),
                inventories
                    .into_iter()
                    .map(|(c, i)| (ResourceClass::new_unchecked(c), i))
                    .collect(),
            ),
        ]);
    }

    fn world(capacity: u64) -> State {
        let mut s = State::new();
        add_provider(&mut s, 1, vec![("VCPU", Inventory::with_total(capacity))]);
        s
    }

    fn claim(consumer: u128, used: u64) -> ConsumerWrite {
        ConsumerWrite {
            consumer: Uuid::from_u128(consumer),
            project_id: "p".into(),
            user_id: "u".into(),
            consumer_type: None,
            generation: ConsumerGeneration::Unchecked,
            allocations: vec![Requested {
                provider: Uuid::from_u128(1).into(),
                class: RequestedName::Name(vcpu()),
                used,
            }],
        }
    }

    fn on(mut w: ConsumerWrite, provider: u128, class: &str, used: u64) -> ConsumerWrite {
        w.allocations.push(Requested {
            provider: Uuid::from_u128(provider).into(),
            class: ResourceClass::requested(class),
            used,
        });
        w
    }

    fn run(s: &mut State, writes: &[ConsumerWrite]) -> crate::Result<()> {
        let (_, changes) = s.plan_allocations(writes, Endpoint::Put, 5)?;
        s.apply(&changes);
        assert!(s.check_usage_index());
        Ok(())
    }

    fn refusal(s: &State, writes: &[ConsumerWrite]) -> Refusal {
        s.plan_refusable(writes, 5).unwrap_err()
    }

    fn generation(s: &State, provider: u64) -> u64 {
        s.provider(ProviderId(provider)).unwrap().row.generation
    }

    fn consumer_generation(s: &State, consumer: u128) -> Option<u64> {
        s.consumer(&Uuid::from_u128(consumer))
            .map(|c| c.row.generation)
    }

    #[test]
    fn claims_stop_at_capacity() {
        let mut s = world(4);
        run(&mut s, &[claim(10, 3)]).unwrap();
        assert!(run(&mut s, &[claim(11, 2)]).is_err());
        run(&mut s, &[claim(11, 1)]).unwrap();
        assert_eq!(s.usage(ProviderId(1), &rc("VCPU")), 4);
        assert_eq!(generation(&s, 1), 2);
    }

    #[test]
    fn replacing_own_claim_counts_only_once() {
        let mut s = world(4);
        run(&mut s, &[claim(10, 4)]).unwrap();
        run(&mut s, &[claim(10, 3)]).unwrap();
        run(&mut s, &[claim(10, 4)]).unwrap();
        assert_eq!(s.usage(ProviderId(1), &rc("VCPU")), 4);
        // Created at 0, then bumped by each of the three writes.
        assert_eq!(consumer_generation(&s, 10), Some(3));
    }

    #[test]
    fn release_deletes_consumer_and_twice_is_harmless() {
        let mut s = world(4);
        run(&mut s, &[claim(10, 2)]).unwrap();
        run(&mut s, &[claim(10, 0)]).unwrap();
        assert!(s.consumer(&Uuid::from_u128(10)).is_none());
        // Emptying a consumer that holds nothing keeps (creates) its record at
        // generation 0, as Placement does.
        run(&mut s, &[claim(10, 0)]).unwrap();
        assert_eq!(s.usage(ProviderId(1), &rc("VCPU")), 0);
        assert_eq!(consumer_generation(&s, 10), Some(0));
        assert!(s.consumer_allocations(&Uuid::from_u128(10)).is_empty());
    }

    #[test]
    fn over_committed_inventory_may_get_no_worse() {
        let mut s = world(4);
        run(&mut s, &[claim(10, 4)]).unwrap();
        // The operator shrinks the inventory below what is used.
        s.apply(&[Change::SetInventories(
            ProviderId(1),
            vec![(vcpu(), Inventory::with_total(2))],
        )]);
        run(&mut s, &[claim(10, 3)]).unwrap();
        assert!(run(&mut s, &[claim(10, 4)]).is_err());
        assert!(run(&mut s, &[claim(11, 1)]).is_err());
    }

    #[test]
    fn many_consumers_are_all_or_nothing() {
        let mut s = world(4);
        assert!(run(&mut s, &[claim(10, 2), claim(11, 3)]).is_err());
        assert!(s.consumer(&Uuid::from_u128(10)).is_none());
        // A swap (the move operation): one consumer releases, another takes it.
        run(&mut s, &[claim(10, 4)]).unwrap();
        run(&mut s, &[claim(10, 0), claim(11, 4)]).unwrap();
        assert_eq!(s.usage(ProviderId(1), &rc("VCPU")), 4);
        assert!(s.consumer(&Uuid::from_u128(10)).is_none());
        assert_eq!(
            refusal(&s, &[claim(12, 1), claim(12, 1)]),
            Refusal::DuplicateConsumer(Uuid::from_u128(12))
        );
    }

    #[test]
    fn consumer_generations_are_checked() {
        let mut s = world(4);
        let mut w = claim(10, 1);
        w.generation = ConsumerGeneration::Is(0);
        assert!(matches!(
            run(&mut s, &[w.clone()]),
            Err(Error::Conflict {
                code: ConflictCode::ConcurrentUpdate,
                ..
            })
        ));
        w.generation = ConsumerGeneration::New;
        run(&mut s, &[w.clone()]).unwrap();
        assert!(run(&mut s, &[w.clone()]).is_err());
        // A new consumer is created at 0 and bumped by its first write.
        w.generation = ConsumerGeneration::Is(0);
        assert!(run(&mut s, &[w.clone()]).is_err());
        w.generation = ConsumerGeneration::Is(1);
        run(&mut s, &[w]).unwrap();
        assert_eq!(consumer_generation(&s, 10), Some(2));
    }

    #[test]
    fn generation_messages_are_placements() {
        let mut s = world(4);
        run(&mut s, &[claim(10, 1)]).unwrap();
        let cases = [
            (11, ConsumerGeneration::Is(5), "expected null but got 5"),
            (10, ConsumerGeneration::New, "expected 1 but got None"),
            (10, ConsumerGeneration::Is(3), "expected 1 but got 3"),
            // A negative generation is repeated as given, and matches nothing.
            (10, ConsumerGeneration::Is(-1), "expected 1 but got -1"),
            (
                11,
                ConsumerGeneration::Is(i128::from(u64::MAX)),
                "expected null but got 18446744073709551615",
            ),
        ];
        for (consumer, given, message) in cases {
            let mut w = claim(consumer, 1);
            w.generation = given;
            let e = run(&mut s, &[w]).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("consumer generation conflict - {message}")
            );
        }
    }

    #[test]
    fn constraints_are_checked() {
        let mut s = world(8);
        s.apply(&[Change::SetInventories(
            ProviderId(1),
            vec![(
                vcpu(),
                Inventory {
                    min_unit: 2,
                    max_unit: 6,
                    step_size: crate::testing::step(2),
                    ..Inventory::with_total(8)
                },
            )],
        )]);
        for bad in [1, 3, 8] {
            assert!(run(&mut s, &[claim(10, bad)]).is_err(), "{bad}");
        }
        run(&mut s, &[claim(10, 6)]).unwrap();
        let mut unknown = claim(11, 1);
        unknown.allocations[0].provider = Uuid::from_u128(99).into();
        assert!(matches!(run(&mut s, &[unknown]), Err(Error::Invalid(_))));
    }

    #[test]
    fn checks_come_in_placements_order() {
        let mut s = world(4);
        add_provider(&mut s, 2, vec![("DISK_GB", Inventory::with_total(10))]);
        run(&mut s, &[claim(10, 1)]).unwrap();
        let p1 = Uuid::from_u128(1);
        let p2 = Uuid::from_u128(2);
        let long = "A".repeat(crate::names::MAX_NAME_LEN + 1);
        let stale = |w: ConsumerWrite| ConsumerWrite {
            generation: ConsumerGeneration::Is(7),
            ..w
        };
        let cases: Vec<(Vec<ConsumerWrite>, Refusal)> = vec![
            // A generation conflict anywhere comes before an unknown provider.
            (
                vec![on(claim(11, 1), 99, "VCPU", 1), stale(claim(10, 1))],
                Refusal::ConsumerGeneration {
                    actual: Some(1),
                    given: ConsumerGeneration::Is(7),
                },
            ),
            // An unknown provider before an unknown class.
            (
                vec![on(on(claim(11, 1), 1, "COWS", 1), 99, "VCPU", 1)],
                Refusal::UnknownProvider(Uuid::from_u128(99).into()),
            ),
            // An unknown class before any inventory problem.
            (
                vec![on(on(claim(11, 9), 2, "VCPU", 1), 1, "COWS", 1)],
                Refusal::UnknownClass {
                    consumer: Uuid::from_u128(11),
                    class: ResourceClass::requested("COWS"),
                },
            ),
            // Text too long to be a class is an unknown class, at the same step.
            (
                vec![on(on(claim(11, 9), 2, "VCPU", 1), 1, &long, 1)],
                Refusal::UnknownClass {
                    consumer: Uuid::from_u128(11),
                    class: RequestedName::NotAName(long.clone()),
                },
            ),
            (
                vec![on(on(claim(11, 1), 1, &long, 1), 99, "VCPU", 1)],
                Refusal::UnknownProvider(Uuid::from_u128(99).into()),
            ),
            // A provider with none of the classes: all classes, in standard order.
            (
                vec![on(claim(11, 1), 2, "MEMORY_MB", 1)],
                Refusal::NoInventory {
                    classes: "VCPU, MEMORY_MB".into(),
                    providers: p2.to_string(),
                },
            ),
            // Then allocation by allocation.
            (
                vec![on(claim(11, 1), 1, "DISK_GB", 1)],
                Refusal::MissingInventory {
                    class: ResourceClass::new_unchecked("DISK_GB"),
                    provider: p1,
                },
            ),
            (
                vec![on(claim(11, 9), 2, "DISK_GB", 0)],
                Refusal::CapacityExceeded {
                    class: vcpu(),
                    provider: p1,
                },
            ),
        ];
        for (writes, expected) in cases {
            assert_eq!(refusal(&s, &writes), expected);
        }
    }

    #[test]
    fn refusals_word_like_placement() {
        let p = Uuid::from_u128(1);
        let cases = [
            (
                Refusal::CapacityExceeded {
                    class: vcpu(),
                    provider: p,
                },
                409,
                format!(
                    "Unable to allocate inventory: Unable to create allocation for 'VCPU' on \
                     resource provider '{p}'. The requested amount would exceed the capacity."
                ),
            ),
            (
                Refusal::MissingInventory {
                    class: vcpu(),
                    provider: p,
                },
                409,
                format!(
                    "Unable to allocate inventory: Inventory for 'VCPU' on resource provider \
                     '{p}' invalid."
                ),
            ),
            (
                Refusal::UnknownProvider(p.into()),
                400,
                format!("Allocation for resource provider '{p}' that does not exist."),
            ),
            // A provider is named as the request spelled it.
            (
                Refusal::UnknownProvider(ProviderRef::parse("X")),
                400,
                "Allocation for resource provider 'X' that does not exist.".into(),
            ),
            (
                Refusal::UnknownClass {
                    consumer: p,
                    class: ResourceClass::requested("COWS"),
                },
                400,
                format!(
                    "Unable to allocate inventory for consumer {p}: No such resource class COWS."
                ),
            ),
        ];
        for (refusal, status, message) in cases {
            let e = refusal.word(Endpoint::Put);
            let got = match &e {
                Error::Invalid(_) => 400,
                Error::Conflict { .. } => 409,
                Error::NotFound(_) => 404,
            };
            assert_eq!((got, e.to_string()), (status, message));
        }
    }

    #[test]
    fn each_endpoint_words_an_unknown_class() {
        let consumer = Uuid::from_u128(10);
        let unknown = || Refusal::UnknownClass {
            consumer,
            class: ResourceClass::requested("COWS"),
        };
        let cases = [
            (
                Endpoint::Put,
                format!(
                    "Unable to allocate inventory for consumer {consumer}: No such resource \
                     class COWS."
                ),
            ),
            (
                Endpoint::Post,
                "Unable to allocate inventory No such resource class COWS.".into(),
            ),
            (
                Endpoint::Reshaper,
                "malformed reshaper data: No such resource class COWS.".into(),
            ),
        ];
        for (endpoint, message) in cases {
            assert_eq!(unknown().word(endpoint).to_string(), message);
        }
        // The other refusals read the same everywhere.
        let capacity = || Refusal::CapacityExceeded {
            class: vcpu(),
            provider: consumer,
        };
        assert_eq!(
            capacity().word(Endpoint::Post).to_string(),
            capacity().word(Endpoint::Reshaper).to_string()
        );
    }

    #[test]
    fn provider_spellings() {
        let p = Uuid::from_u128(1);
        assert_eq!(ProviderRef::parse(&p.to_string()), ProviderRef::Uuid(p));
        // Without dashes (upper case would be the same here: the uuid has no letters).
        let upper = p.simple().to_string();
        assert_eq!(ProviderRef::parse(&upper).uuid(), None);
        assert_eq!(ProviderRef::parse(&upper).to_string(), upper);
        let letters = "9E3CBBA2-2FE3-4BE5-9D0B-2D1C2E5C5D9E";
        assert_eq!(ProviderRef::parse(letters).uuid(), None);
        // A provider that exists, named in another spelling, is refused as unknown.
        let mut s = world(4);
        let mut w = claim(10, 1);
        w.allocations[0].provider = ProviderRef::parse(&upper);
        assert_eq!(
            refusal(&s, &[w.clone()]),
            Refusal::UnknownProvider(ProviderRef::Spelled(upper))
        );
        w.allocations[0].provider = ProviderRef::parse(&p.to_string());
        run(&mut s, &[w]).unwrap();
    }

    #[test]
    fn generations_bump_like_placement() {
        let mut s = world(8);
        add_provider(&mut s, 2, vec![("VCPU", Inventory::with_total(8))]);
        // Moving a consumer from 1 to 2 bumps only 2.
        run(&mut s, &[claim(10, 1)]).unwrap();
        assert_eq!((generation(&s, 1), generation(&s, 2)), (1, 0));
        let mut moved = claim(10, 1);
        moved.allocations[0].provider = Uuid::from_u128(2).into();
        run(&mut s, &[moved]).unwrap();
        assert_eq!((generation(&s, 1), generation(&s, 2)), (1, 1));
        // Emptying it bumps the provider it leaves.
        run(&mut s, &[claim(10, 0)]).unwrap();
        assert_eq!((generation(&s, 1), generation(&s, 2)), (1, 2));
        // Emptying a consumer that holds nothing bumps nothing.
        run(&mut s, &[claim(11, 0)]).unwrap();
        assert_eq!((generation(&s, 1), generation(&s, 2)), (1, 2));
        // DELETE bumps nothing either.
        run(&mut s, &[claim(12, 2)]).unwrap();
        let (_, changes) = s.delete_allocations(&Uuid::from_u128(12)).unwrap();
        s.apply(&changes);
        assert_eq!((generation(&s, 1), generation(&s, 2)), (2, 2));
        assert!(s.consumer(&Uuid::from_u128(12)).is_none());
        assert_eq!(
            s.delete_allocations(&Uuid::from_u128(12))
                .unwrap_err()
                .to_string(),
            format!("No allocations for consumer '{}'", Uuid::from_u128(12))
        );
        // An empty consumer record has nothing to delete either.
        assert!(s.delete_allocations(&Uuid::from_u128(11)).is_err());
    }

    #[test]
    fn project_user_and_type_follow_the_last_write() {
        let mut s = world(8);
        let mut w = claim(10, 1);
        w.consumer_type = Some("INSTANCE".into());
        run(&mut s, &[w]).unwrap();
        let mut w = claim(10, 2);
        w.project_id = "p2".into();
        w.user_id = "u2".into();
        run(&mut s, &[w]).unwrap();
        let row = &s.consumer(&Uuid::from_u128(10)).unwrap().row;
        assert_eq!((&*row.project_id, &*row.user_id), ("p2", "u2"));
        // No type given (before 1.38) keeps the one there is.
        assert_eq!(row.consumer_type.as_deref(), Some("INSTANCE"));
        let mut w = claim(10, 2);
        w.consumer_type = Some("MIGRATION".into());
        run(&mut s, &[w]).unwrap();
        let row = &s.consumer(&Uuid::from_u128(10)).unwrap().row;
        assert_eq!(row.consumer_type.as_deref(), Some("MIGRATION"));
    }

    #[test]
    fn listings_group_by_provider_and_consumer() {
        let mut s = world(8);
        add_provider(
            &mut s,
            2,
            vec![
                ("VCPU", Inventory::with_total(8)),
                ("DISK_GB", Inventory::with_total(8)),
            ],
        );
        run(
            &mut s,
            &[
                on(on(claim(10, 1), 2, "VCPU", 2), 2, "DISK_GB", 3),
                on(claim(11, 4), 2, "DISK_GB", 1),
            ],
        )
        .unwrap();
        let held = s.consumer_allocations(&Uuid::from_u128(10));
        let shape: Vec<(u64, Vec<(&str, u64)>)> = held
            .iter()
            .map(|h| {
                (
                    h.provider.id().0,
                    h.resources.iter().map(|(c, n)| (c.as_str(), *n)).collect(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                (1, vec![("VCPU", 1)]),
                (2, vec![("DISK_GB", 3), ("VCPU", 2)])
            ]
        );
        let mut on_two: Vec<(Uuid, usize)> = s
            .provider_allocations(ProviderId(2))
            .iter()
            .map(|(c, a)| (c.row.uuid, a.len()))
            .collect();
        on_two.sort();
        assert_eq!(
            on_two,
            vec![(Uuid::from_u128(10), 2), (Uuid::from_u128(11), 1)]
        );
        assert!(s.consumer_allocations(&Uuid::from_u128(99)).is_empty());
    }
}
