//! Server groups' writes (issue 44), and the check every member-placing write makes.
//!
//! A group is made, deleted (not while it has members, unless forced) and given or
//! relieved of members. The rule is kept by the writer: a write that places a member
//! (a claim, a pick, a confirm; Placement's allocation writes for groups made with
//! `enforce_on_allocations`) is planned, then the number of
//! [`Rule::broken`](crate::server_groups::Rule::broken) of each hard group of the
//! consumers it places is compared on the view before and on the view after
//! ([`State::groups_kept`]). A write that makes it grow is refused with
//! [`ConflictCode::ServerGroupViolated`] and changes nothing. Because the writer
//! plans one write at a time against the view it then applies, two schedulers can
//! never break a rule between them.

use uuid::Uuid;

use super::Plan;
use crate::change::Change;
use crate::error::{ConflictCode, Error};
use crate::model::Timestamp;
use crate::server_groups::{Domain, Policy, Rule, Scope, ServerGroup, Tally};
use crate::state::State;

/// A group as a request asks for it, checked for form at the edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewServerGroup {
    /// Its uuid (drawn by the caller, or Nova's).
    pub uuid: Uuid,
    /// Its name.
    pub name: String,
    /// Its project.
    pub project_id: String,
    /// Its user.
    pub user_id: String,
    /// The policy.
    pub policy: Policy,
    /// Nova's `max_server_per_host` (anti-affinity only; 1 when not given).
    pub max_per_domain: u32,
    /// Where the rule is kept.
    pub scope: Scope,
    /// Whether Placement's allocation writes are checked too.
    pub enforce_on_allocations: bool,
}

/// Which groups a write answers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforced {
    /// Every hard group: allot's own writes (claims, picks, confirms, drains).
    Always,
    /// Hard groups made with `enforce_on_allocations`: Placement's allocation
    /// writes, where Nova keeps its own checks and an admin may force a move.
    OnAllocations,
}

impl NewServerGroup {
    /// The record of the group, with these members and times.
    fn record(
        self,
        members: Vec<Uuid>,
        created_at: Timestamp,
        updated_at: Timestamp,
    ) -> crate::Result<ServerGroup> {
        if self.max_per_domain == 0 {
            return Err(Error::invalid("max_server_per_host must be at least 1."));
        }
        Ok(ServerGroup {
            uuid: self.uuid,
            name: self.name,
            project_id: self.project_id,
            user_id: self.user_id,
            policy: self.policy,
            max_per_domain: self.max_per_domain,
            scope: self.scope,
            enforce_on_allocations: self.enforce_on_allocations,
            members,
            created_at,
            updated_at,
        })
    }
}

fn unknown_group(uuid: &Uuid) -> Error {
    Error::not_found(format!("No server group with uuid {uuid} found."))
}

impl State {
    /// Plans a new group (no members yet).
    pub fn plan_create_server_group(
        &self,
        new: NewServerGroup,
        now: Timestamp,
    ) -> Plan<ServerGroup> {
        if self.server_group(&new.uuid).is_some() {
            return Err(Error::conflict(
                ConflictCode::Duplicate,
                format!("A server group with uuid {} already exists.", new.uuid),
            ));
        }
        let group = new.record(Vec::new(), now, now)?;
        Ok((group.clone(), vec![Change::PutServerGroup(Box::new(group))]))
    }

    /// Plans creating or replacing a group whole, members included, as another
    /// system holds it (an import of Nova's groups): nothing is checked of where the
    /// members are, so a group may start broken; the writes after it may not make
    /// it worse. A group replaced keeps its `created_at`.
    pub fn plan_put_server_group(
        &self,
        new: NewServerGroup,
        members: &[Uuid],
        now: Timestamp,
    ) -> Plan<ServerGroup> {
        let mut members = members.to_vec();
        members.sort_unstable();
        members.dedup();
        let old = self.server_group(&new.uuid);
        let (created, updated) = old.map_or((now, now), |g| (g.created_at, g.updated_at));
        let mut group = new.record(members, created, updated)?;
        if old == Some(&group) {
            // As it is: nothing to write (an import run twice).
            return Ok((group, Vec::new()));
        }
        group.updated_at = now;
        Ok((group.clone(), vec![Change::PutServerGroup(Box::new(group))]))
    }

    /// Plans deleting a group: refused while it has members unless `force`.
    pub fn plan_delete_server_group(&self, uuid: &Uuid, force: bool) -> Plan<()> {
        let group = self.server_group(uuid).ok_or_else(|| unknown_group(uuid))?;
        if !group.members.is_empty() && !force {
            return Err(Error::conflict(
                ConflictCode::Other,
                format!(
                    "Server group {uuid} has {} members: remove them first, or delete it \
                     with force=true.",
                    group.members.len()
                ),
            ));
        }
        Ok(((), vec![Change::DeleteServerGroup(*uuid)]))
    }

    /// Plans adding and removing members. A member added where it already is must
    /// not make a hard rule more broken (it is refused as a claim there would be);
    /// adding a member twice, or removing one that is not, changes nothing.
    pub fn plan_server_group_members(
        &self,
        uuid: &Uuid,
        add: &[Uuid],
        remove: &[Uuid],
        now: Timestamp,
    ) -> Plan<ServerGroup> {
        let mut group = self
            .server_group(uuid)
            .ok_or_else(|| unknown_group(uuid))?
            .clone();
        let before = group.members.clone();
        group.members.retain(|m| !remove.contains(m));
        group
            .members
            .extend(add.iter().filter(|m| !remove.contains(m)));
        group.members.sort_unstable();
        group.members.dedup();
        if group.members == before {
            return Ok((group, Vec::new()));
        }
        group.updated_at = now;
        let changes = vec![Change::PutServerGroup(Box::new(group.clone()))];
        let joined: Vec<Uuid> = add
            .iter()
            .filter(|m| !before.contains(m))
            .copied()
            .collect();
        self.kept_after(&changes, &joined, Enforced::Always, now)?;
        Ok((group, changes))
    }

    /// The change that makes `consumer` a member of `group` (None if it is one).
    pub(crate) fn join_group(
        &self,
        group: &Uuid,
        consumer: Uuid,
        now: Timestamp,
    ) -> crate::Result<Option<Change>> {
        let group = self
            .server_group(group)
            .ok_or_else(|| Error::invalid(format!("No server group with uuid {group} found.")))?;
        if group.has_member(&consumer) {
            return Ok(None);
        }
        Ok(Some(Change::JoinServerGroup {
            group: group.uuid,
            consumer,
            at: now,
        }))
    }

    /// Refuses `changes` (planned against this view) if they make a hard group of
    /// one of `placed` more broken. Free when no group is concerned.
    pub(crate) fn kept_after(
        &self,
        changes: &[Change],
        placed: &[Uuid],
        enforced: Enforced,
        now: Timestamp,
    ) -> crate::Result<()> {
        let joins = changes.iter().any(|c| {
            matches!(
                c,
                Change::PutServerGroup(_) | Change::JoinServerGroup { .. }
            )
        });
        if !joins && placed.iter().all(|c| self.groups_of(c).is_empty()) {
            return Ok(());
        }
        let mut after = self.clone();
        after.apply(changes);
        self.groups_kept(&after, placed, enforced, now)
    }

    /// Refuses the move from this view to `after` if it makes a hard group of one of
    /// `placed` (their groups in `after`) more broken, naming the group, its policy
    /// and the domain where the member went.
    pub fn groups_kept(
        &self,
        after: &State,
        placed: &[Uuid],
        enforced: Enforced,
        now: Timestamp,
    ) -> crate::Result<()> {
        let mut seen: Vec<Uuid> = Vec::new();
        for consumer in placed {
            for g in after.groups_of(consumer) {
                if seen.contains(g) {
                    continue;
                }
                seen.push(*g);
                let Some(group) = after.server_group(g) else {
                    continue;
                };
                let answers = match enforced {
                    Enforced::Always => true,
                    Enforced::OnAllocations => group.enforce_on_allocations,
                };
                if !group.policy.is_hard() || !answers {
                    continue;
                }
                let rule = group.rule();
                // Before: the members then (one joining now counts from now on).
                let members_then = self.server_group(g).map_or(&[][..], |old| &old.members);
                let then = self.group_broken(&rule, members_then, now);
                if after.group_broken(&rule, &group.members, now) > then {
                    return Err(violated(after, group, consumer, now));
                }
            }
        }
        Ok(())
    }
}

/// What a pick asks of each root for one instance: would a claim of its consumer
/// there make one of its groups more broken? The members' places are read once per
/// instance, and each root costs a look at its own domains (as
/// [`State::claim_breaks`] answers, without reading the members again).
#[derive(Debug, Default)]
pub(crate) struct Guard {
    /// The hard groups' checks: a root that breaks one is not admitted.
    pub hard: Vec<RootCheck>,
    /// The soft groups': roots that break none are tried first.
    pub soft: Vec<RootCheck>,
}

/// One group's check of a root.
#[derive(Debug)]
pub(crate) struct RootCheck {
    /// The group.
    pub group: Uuid,
    rule: Rule,
    /// The other members, counted per domain once.
    others: Tally,
    /// Where the consumer's live claims already put it.
    own: Vec<Domain>,
    /// The number now.
    before: u64,
}

impl RootCheck {
    /// The check of `group`'s `rule` for a claim of `consumer`, the other members
    /// being those of `members` besides it (a consumer not among them joins with
    /// the claim: the group's number before does not count it).
    pub fn new(
        state: &State,
        group: Uuid,
        rule: Rule,
        members: &[Uuid],
        consumer: &Uuid,
        now: Timestamp,
    ) -> RootCheck {
        let others = state.tally_members(&rule, members.iter().filter(|m| *m != consumer), now);
        let mine = match members.contains(consumer) {
            true => state.member_domains(&rule, consumer, now),
            false => Vec::new(),
        };
        RootCheck {
            group,
            before: others.broken_with(&mine),
            own: state.live_claim_domains(&rule, consumer, now),
            others,
            rule,
        }
    }

    /// Whether a new claim of the consumer on `root` makes the group more broken:
    /// the root's own domains looked up in the tally, the members not recounted.
    pub fn breaks(&self, root: &crate::model::Provider) -> bool {
        let mut mine = self.own.clone();
        self.rule.scope.push_domains(root, &mut mine);
        mine.sort();
        mine.dedup();
        self.others.broken_with(&mine) > self.before
    }
}

impl Guard {
    /// The checks for a claim of `consumer`, which joins `join` with it, on `state`;
    /// the members in `unplaced` count nowhere (they move with it, later).
    pub fn new(
        state: &State,
        consumer: &Uuid,
        join: Option<Uuid>,
        unplaced: &[Uuid],
        now: Timestamp,
    ) -> Guard {
        let mut guard = Guard::default();
        let mut groups: Vec<Uuid> = state.groups_of(consumer).to_vec();
        groups.extend(join.filter(|g| !groups.contains(g)));
        for g in groups {
            let Some(group) = state.server_group(&g) else {
                continue;
            };
            let members: Vec<Uuid> = group
                .members
                .iter()
                .filter(|m| !unplaced.contains(m))
                .copied()
                .collect();
            let check = RootCheck::new(state, g, group.rule(), &members, consumer, now);
            match group.policy.is_hard() {
                true => guard.hard.push(check),
                false => guard.soft.push(check),
            }
        }
        guard
    }

    /// Whether there is nothing to check.
    pub fn is_empty(&self) -> bool {
        self.hard.is_empty() && self.soft.is_empty()
    }

    /// Refuses the claim of `consumer` the guard was made for, now applied to
    /// `after`, if it made a hard group more broken: what [`State::groups_kept`]
    /// answers, with the other members counted once already (a claim moves its own
    /// consumer only). The guard chose the root; this confirms it, as a candidate on
    /// sharing providers alone has no root the guard saw.
    pub fn confirm(&self, after: &State, consumer: &Uuid, now: Timestamp) -> crate::Result<()> {
        for check in &self.hard {
            let mine = after.member_domains(&check.rule, consumer, now);
            if check.others.broken_with(&mine) > check.before {
                // (The claim deletes no group: the record is there to name.)
                if let Some(group) = after.server_group(&check.group) {
                    return Err(violated(after, group, consumer, now));
                }
            }
        }
        Ok(())
    }
}

/// The refusal of a write that would break `group` by placing `consumer`.
pub(crate) fn violated(
    after: &State,
    group: &ServerGroup,
    consumer: &Uuid,
    now: Timestamp,
) -> Error {
    let rule = group.rule();
    let domains_of = |m: &Uuid| after.member_domains(&rule, m, now);
    let mine = domains_of(consumer);
    // The domain that went over: the one the others crowd (anti-affinity), or the
    // one the member went to apart from them (affinity).
    let crowded = |d: &Domain| {
        group
            .members
            .iter()
            .filter(|m| domains_of(m).contains(d))
            .count()
            > rule.max_per_domain.max(1) as usize
    };
    let domain = match group.policy.is_anti() {
        true => mine.iter().find(|d| crowded(d)),
        false => mine.first(),
    }
    .or(mine.first());
    let place = match (domain, &rule.scope) {
        (Some(d), Scope::Root) => format!("root {d}"),
        (Some(d), scope) => format!("{scope} domain {d}"),
        (None, _) => "nowhere".to_owned(),
    };
    Error::conflict(
        ConflictCode::ServerGroupViolated,
        format!(
            "Server group {} ({}) would be broken: member {consumer} on {place}.",
            group.uuid,
            group.policy.as_str()
        ),
    )
}

#[cfg(test)]
mod tests;
