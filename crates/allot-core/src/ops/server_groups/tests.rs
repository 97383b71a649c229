//! The writer keeps server groups: over random worlds and random writes (claims,
//! picks, allocations, confirms, drains and their ends, member changes, releases,
//! expiries, trait and aggregate changes), no write that places a member makes a
//! hard rule more broken, a refused write is refused for a reason it names, and the
//! view's member index stays exact.

use super::*;
use crate::candidates::{CandidateQuery, RequestGroup, Rng, SearchOptions, Sort};
use crate::model::{Inventory, ProviderId};
use crate::names::RequestedName;
use crate::ops::allocations::{ConsumerGeneration, ConsumerWrite, Endpoint, Requested};
use crate::ops::claims::NewClaim;
use crate::ops::pick::{Affinity, Pick};
use crate::testing::{new_provider, pick_claim, rc, tn};

const SHARED: u64 = 100;

fn group_uuid(n: usize) -> Uuid {
    Uuid::from_u128(0x6000 + n as u128)
}

fn consumer(n: usize) -> Uuid {
    Uuid::from_u128(0xc000 + n as u128)
}

/// Roots 1..=roots, each with a child holding its VCPU (or the VCPU on the root),
/// in two racks and two aggregates at random, beside a sharing disk pool.
fn world(rng: &mut Rng, roots: u64) -> State {
    let mut s = State::new();
    let mut changes = vec![
        new_provider(SHARED, Uuid::from_u128(0xd15c), None, 0),
        Change::SetInventories(
            ProviderId(SHARED),
            vec![(rc("DISK_GB"), Inventory::with_total(40))],
        ),
        Change::SetTraits(ProviderId(SHARED), vec![tn("MISC_SHARES_VIA_AGGREGATE")]),
        Change::SetAggregates(ProviderId(SHARED), vec![Uuid::from_u128(0xa1)]),
    ];
    for r in 1..=roots {
        changes.push(new_provider(r, Uuid::from_u128(u128::from(r)), None, 0));
        let holder = if rng.below(2) == 0 {
            r
        } else {
            changes.push(new_provider(
                r + 50,
                Uuid::from_u128(u128::from(r + 50)),
                Some(r),
                0,
            ));
            r + 50
        };
        let vcpus = 1 + rng.below(3) as u64;
        changes.push(Change::SetInventories(
            ProviderId(holder),
            vec![(rc("VCPU"), Inventory::with_total(vcpus))],
        ));
        let rack = ["CUSTOM_RACK_A", "CUSTOM_RACK_B"][rng.below(2)];
        changes.push(Change::SetTraits(ProviderId(r), vec![tn(rack)]));
        let aggregates = match rng.below(3) {
            0 => vec![],
            1 => vec![Uuid::from_u128(0xa1)],
            _ => vec![Uuid::from_u128(0xa1), Uuid::from_u128(0xa2)],
        };
        changes.push(Change::SetAggregates(ProviderId(r), aggregates));
    }
    s.apply(&changes);
    s
}

fn random_group(rng: &mut Rng, n: usize) -> NewServerGroup {
    NewServerGroup {
        uuid: group_uuid(n),
        name: format!("g{n}"),
        project_id: "p".into(),
        user_id: "u".into(),
        policy: [
            Policy::Affinity,
            Policy::AntiAffinity,
            Policy::SoftAffinity,
            Policy::SoftAntiAffinity,
        ][rng.below(4)],
        max_per_domain: 1 + rng.below(2) as u32,
        scope: [
            Scope::Root,
            Scope::Aggregate,
            Scope::TraitPrefix("CUSTOM_RACK_".into()),
        ][rng.below(3)]
        .clone(),
        enforce_on_allocations: rng.below(2) == 0,
    }
}

fn vcpu_query(disk: bool) -> CandidateQuery {
    let mut resources = vec![(RequestedName::Name(rc("VCPU")), 1)];
    if disk {
        resources.push((RequestedName::Name(rc("DISK_GB")), 1));
    }
    CandidateQuery {
        groups: vec![RequestGroup {
            resources,
            ..Default::default()
        }],
        nested_aware: true,
        ..Default::default()
    }
}

/// A random VCPU holder (a root or its child) and its uuid.
fn holder(s: &State, rng: &mut Rng, roots: u64) -> Uuid {
    let r = 1 + rng.below(roots as usize) as u64;
    let id = if s.provider(ProviderId(r + 50)).is_some() {
        r + 50
    } else {
        r
    };
    s.uuid_of(ProviderId(id))
}

fn one_vcpu(provider: Uuid) -> Vec<Requested> {
    vec![Requested {
        provider: provider.into(),
        class: RequestedName::Name(rc("VCPU")),
        used: 1,
    }]
}

/// Each hard group's number, as Placement's writes (`allocations`) or allot's see
/// them.
fn numbers(s: &State, now: Timestamp, allocations: bool) -> Vec<(Uuid, u64)> {
    let mut out: Vec<(Uuid, u64)> = s
        .server_groups()
        .filter(|g| g.policy.is_hard() && (!allocations || g.enforce_on_allocations))
        .map(|g| (g.uuid, s.group_broken(&g.rule(), &g.members, now)))
        .collect();
    out.sort_unstable();
    out
}

#[derive(Debug, Default)]
struct Tally {
    accepted: usize,
    violated: usize,
    soft_broken: usize,
    grouped_picks: usize,
    broken_groups_seen: usize,
    drained: usize,
    drains_confirmed: usize,
    groups_put_back: usize,
}

/// A drain of one root, every consumer there, all or none.
fn drain_of(root: Uuid, n: u128) -> crate::ops::drains::NewDrain {
    crate::ops::drains::NewDrain {
        uuid: Uuid::from_u128(0xd000 + n),
        roots: vec![root],
        consumers: None,
        requests: Default::default(),
        required: Vec::new(),
        partial: false,
        weigh: Default::default(),
        expires_at: None,
        disable: n.is_multiple_of(2),
        options: SearchOptions::default(),
    }
}

/// Random worlds, random groups (some start broken: members placed before they
/// joined), random writes of every kind. After each accepted write that places
/// members, no hard group of theirs is more broken; writes that place nobody may
/// (a release, an expiry, a trait moving a root to another rack) and are checked
/// only for the index.
#[test]
fn no_member_placing_write_makes_a_hard_rule_more_broken() {
    let mut rng = Rng::new(4404);
    let mut tally = Tally::default();
    for case in 0..150 {
        let roots = 4 + rng.below(5) as u64;
        let mut s = world(&mut rng, roots);
        let mut now: Timestamp = 0;
        let mut n = 0u128;
        let groups = 2 + rng.below(3);
        // Consumers placed by allocations first, some of them then made members
        // (the groups may start broken).
        for c in 0..6 {
            let provider = holder(&s, &mut rng, roots);
            let write = ConsumerWrite {
                consumer: consumer(c),
                project_id: "p".into(),
                user_id: "u".into(),
                consumer_type: None,
                generation: ConsumerGeneration::Unchecked,
                allocations: one_vcpu(provider),
            };
            if let Ok(((), changes)) = s.plan_allocations(&[write], Endpoint::Put, now) {
                s.apply(&changes);
            }
        }
        for g in 0..groups {
            let (_, changes) = s
                .plan_create_server_group(random_group(&mut rng, g), now)
                .unwrap();
            s.apply(&changes);
            let members: Vec<Uuid> = (0..6).filter(|_| rng.below(3) == 0).map(consumer).collect();
            // Straight into the record: an import of a group Nova holds broken.
            let mut record = s.server_group(&group_uuid(g)).unwrap().clone();
            record.members = members;
            record.members.sort_unstable();
            s.apply(&[Change::PutServerGroup(Box::new(record))]);
        }
        tally.broken_groups_seen += numbers(&s, now, false)
            .iter()
            .filter(|(_, b)| *b > 0)
            .count();
        assert!(s.check_usage_index(), "case {case}");
        for step in 0..40 {
            let kind = rng.below(11);
            let who = rng.below(12);
            let join = (rng.below(3) > 0).then(|| group_uuid(rng.below(groups)));
            n += 1;
            // (the plan, who it places, whether Placement's writes are the judge)
            let (planned, placed, allocations): (crate::Result<Vec<Change>>, Vec<Uuid>, bool) =
                match kind {
                    0 | 1 => {
                        let claim = NewClaim {
                            consumer: consumer(who),
                            allocations: one_vcpu(holder(&s, &mut rng, roots)),
                            expires_at: [None, Some(now + 5)][rng.below(2)],
                            server_group: join,
                            ..pick_claim(n)
                        };
                        let result = s.plan_create_claim(claim, now).map(|(_, c)| c);
                        (result, vec![consumer(who)], false)
                    }
                    2 | 3 => {
                        let instances = 1 + rng.below(3);
                        let claims: Vec<NewClaim> = (0..instances)
                            .map(|i| NewClaim {
                                consumer: consumer((who + i) % 12),
                                server_group: join,
                                ..pick_claim(n * 10 + i as u128)
                            })
                            .collect();
                        let placed = claims.iter().map(|c| c.consumer).collect();
                        let mut query = vcpu_query(rng.below(3) == 0);
                        if rng.below(2) == 0 {
                            query.weigh.sort = Some(Sort::Spread);
                        }
                        let pick = Pick {
                            query,
                            options: SearchOptions::default(),
                            claims,
                            affinity: [Affinity::None, Affinity::DifferentRoots][rng.below(2)],
                            partial: rng.below(2) == 0,
                            shapes: Vec::new(),
                            together: false,
                        };
                        tally.grouped_picks += usize::from(join.is_some());
                        let result = s.plan_pick(pick, now).map(|(placed, c)| {
                            tally.soft_broken += placed.soft_broken.len();
                            c
                        });
                        (result, placed, false)
                    }
                    4 => {
                        let write = ConsumerWrite {
                            consumer: consumer(who),
                            project_id: "p".into(),
                            user_id: "u".into(),
                            consumer_type: None,
                            generation: ConsumerGeneration::Unchecked,
                            allocations: one_vcpu(holder(&s, &mut rng, roots)),
                        };
                        let result = s.plan_allocations(&[write], Endpoint::Put, now);
                        (result.map(|((), c)| c), vec![consumer(who)], true)
                    }
                    5 => {
                        let pending: Vec<Uuid> =
                            s.claims().filter(|c| c.live(now)).map(|c| c.uuid).collect();
                        if pending.is_empty() {
                            continue;
                        }
                        let uuid = pending[rng.below(pending.len())];
                        let member = s.claim(&uuid).unwrap().consumer;
                        let replace = rng.below(2) == 0;
                        let result = s.plan_confirm_claim(&uuid, replace, now).map(|(_, c)| c);
                        (result, vec![member], false)
                    }
                    6 => {
                        let g = group_uuid(rng.below(groups));
                        let add = [consumer(who)];
                        let result = s.plan_server_group_members(&g, &add, &[], now);
                        (result.map(|(_, c)| c), vec![consumer(who)], false)
                    }
                    7 => {
                        // Places nobody: a release, a leave, a root moving rack or
                        // aggregate, or every group deleted and put back as it was
                        // (the view's counts of pending claims go and are made again
                        // with claims in the view).
                        let changes = match rng.below(5) {
                            0 => s
                                .plan_release_consumer_claims(&consumer(who), now)
                                .map(|(_, c)| c),
                            1 => s
                                .plan_server_group_members(
                                    &group_uuid(rng.below(groups)),
                                    &[],
                                    &[consumer(who)],
                                    now,
                                )
                                .map(|(_, c)| c),
                            2 => {
                                let r = 1 + rng.below(roots as usize) as u64;
                                let rack = ["CUSTOM_RACK_A", "CUSTOM_RACK_B"][rng.below(2)];
                                Ok(vec![Change::SetTraits(ProviderId(r), vec![tn(rack)])])
                            }
                            3 => {
                                let r = 1 + rng.below(roots as usize) as u64;
                                let aggregates = vec![Uuid::from_u128(0xa1 + rng.below(2) as u128)];
                                Ok(vec![Change::SetAggregates(ProviderId(r), aggregates)])
                            }
                            _ => {
                                // (Or all but one, which is then replaced while
                                // it is the only group.)
                                let all: Vec<ServerGroup> = s.server_groups().cloned().collect();
                                let kept = usize::from(rng.below(2) == 0);
                                let gone = all
                                    .iter()
                                    .skip(kept)
                                    .map(|g| Change::DeleteServerGroup(g.uuid));
                                let back = all
                                    .iter()
                                    .cloned()
                                    .map(|g| Change::PutServerGroup(Box::new(g)));
                                tally.groups_put_back += 1;
                                Ok(gone.chain(back).collect())
                            }
                        };
                        (changes, Vec::new(), false)
                    }
                    9 => {
                        let root = s.uuid_of(ProviderId(1 + rng.below(roots as usize) as u64));
                        let mut drain = drain_of(root, n);
                        drain.partial = rng.below(2) == 0;
                        let mut next = n * 100;
                        let mut draw = || {
                            next += 1;
                            Uuid::from_u128(0xc1a1_0000 + next)
                        };
                        let result = s.plan_drain(drain, &mut draw, now).map(|(d, c)| {
                            assert!(
                                !c.iter().any(|c| matches!(c, Change::SetAllocations(..))),
                                "a drain moves nobody before its confirm"
                            );
                            tally.drained += d.claims.len();
                            (c, d.claims.iter().map(|c| c.consumer).collect())
                        });
                        match result {
                            Ok((changes, moved)) => (Ok(changes), moved, false),
                            Err(e) => (Err(e), Vec::new(), false),
                        }
                    }
                    10 => {
                        let drains: Vec<Uuid> = s.drains().map(|d| d.uuid).collect();
                        if drains.is_empty() {
                            continue;
                        }
                        let uuid = drains[rng.below(drains.len())];
                        let moved: Vec<Uuid> = s
                            .drain(&uuid)
                            .unwrap()
                            .claims
                            .iter()
                            .map(|c| c.consumer)
                            .collect();
                        if rng.below(3) == 0 {
                            let result = s.plan_abandon_drain(&uuid, now).map(|((), c)| c);
                            (result, Vec::new(), false)
                        } else {
                            tally.drains_confirmed += 1;
                            let result = s.plan_confirm_drain(&uuid, now).map(|(_, c)| c);
                            (result, moved, false)
                        }
                    }
                    _ => {
                        now += 3; // claims expire as time passes
                        continue;
                    }
                };
            match planned {
                Ok(changes) => {
                    let before = numbers(&s, now, allocations);
                    let mut after = s.clone();
                    after.apply(&changes);
                    if !placed.is_empty() {
                        let concerned: Vec<Uuid> = placed
                            .iter()
                            .flat_map(|c| after.groups_of(c).to_vec())
                            .collect();
                        for (g, then) in numbers(&after, now, allocations) {
                            let was = before.iter().find(|(b, _)| *b == g).map_or(0, |b| b.1);
                            assert!(
                                !concerned.contains(&g) || then <= was,
                                "case {case} step {step} kind {kind}: group {g} from {was} to {then}: {changes:?}"
                            );
                        }
                    }
                    s = after;
                    tally.accepted += 1;
                }
                Err(Error::Conflict {
                    code: ConflictCode::ServerGroupViolated,
                    message,
                }) => {
                    assert!(message.contains("would be broken"), "{message}");
                    tally.violated += 1;
                }
                Err(_) => {}
            }
            assert!(s.check_usage_index(), "case {case} step {step}");
        }
    }
    assert!(tally.accepted > 1000, "{tally:?}");
    assert!(tally.violated > 50, "{tally:?}");
    assert!(tally.soft_broken > 10, "{tally:?}");
    assert!(tally.grouped_picks > 500, "{tally:?}");
    assert!(tally.broken_groups_seen > 20, "{tally:?}");
    assert!(tally.groups_put_back > 50, "{tally:?}");
    assert!(
        tally.drained > 50 && tally.drains_confirmed > 50,
        "{tally:?}"
    );
}

/// A pick keeps a hard rule as it chooses: of an anti-affinity group whose first
/// member runs on root 1, three more members land on three other roots, and a fifth
/// on four roots is refused naming the group.
#[test]
fn a_pick_places_members_apart_and_refuses_the_one_that_does_not_fit() {
    let mut rng = Rng::new(1);
    let mut s = State::new();
    let mut changes = Vec::new();
    for r in 1..=4u64 {
        changes.push(new_provider(r, Uuid::from_u128(u128::from(r)), None, 0));
        changes.push(Change::SetInventories(
            ProviderId(r),
            vec![(rc("VCPU"), Inventory::with_total(8))],
        ));
    }
    s.apply(&changes);
    let mut new = random_group(&mut rng, 0);
    new.policy = Policy::AntiAffinity;
    new.max_per_domain = 1;
    new.scope = Scope::Root;
    let (_, changes) = s.plan_create_server_group(new, 0).unwrap();
    s.apply(&changes);
    let first = NewClaim {
        consumer: consumer(0),
        allocations: one_vcpu(Uuid::from_u128(1)),
        server_group: Some(group_uuid(0)),
        ..pick_claim(0)
    };
    let (_, changes) = s.plan_create_claim(first, 0).unwrap();
    s.apply(&changes);
    // On root 1 again: refused, naming the group, the policy and the root.
    let again = NewClaim {
        consumer: consumer(1),
        allocations: one_vcpu(Uuid::from_u128(1)),
        server_group: Some(group_uuid(0)),
        ..pick_claim(1)
    };
    match s.plan_create_claim(again, 0) {
        Err(Error::Conflict { code, message }) => {
            assert_eq!(code, ConflictCode::ServerGroupViolated);
            let root = Uuid::from_u128(1);
            let expected = format!("{} (anti-affinity)", group_uuid(0));
            assert!(message.contains(&expected) && message.contains(&format!("root {root}")));
        }
        other => panic!("{other:?}"),
    }
    let pick = |from: u128, count: u128| Pick {
        query: vcpu_query(false),
        options: SearchOptions::default(),
        claims: (from..from + count)
            .map(|i| NewClaim {
                consumer: consumer(i as usize),
                server_group: Some(group_uuid(0)),
                ..pick_claim(i)
            })
            .collect(),
        affinity: Affinity::None,
        partial: false,
        shapes: Vec::new(),
        together: false,
    };
    let (placed, changes) = s.plan_pick(pick(1, 3), 0).unwrap();
    s.apply(&changes);
    let mut roots: Vec<Uuid> = placed
        .claims
        .iter()
        .map(|c| c.allocations[0].provider)
        .collect();
    roots.sort_unstable();
    assert_eq!(roots, (2..=4).map(Uuid::from_u128).collect::<Vec<_>>());
    let group = s.server_group(&group_uuid(0)).unwrap();
    assert_eq!(group.members, (0..4).map(consumer).collect::<Vec<_>>());
    assert!(matches!(
        s.plan_pick(pick(4, 1), 0),
        Err(Error::Conflict {
            code: ConflictCode::ClaimDoesNotFit,
            ..
        })
    ));
    // The same member soft: placed, and said to break the rule.
    let mut soft = s.server_group(&group_uuid(0)).unwrap().clone();
    soft.policy = Policy::SoftAntiAffinity;
    s.apply(&[Change::PutServerGroup(Box::new(soft))]);
    let (placed, _) = s.plan_pick(pick(4, 1), 0).unwrap();
    assert_eq!(placed.soft_broken, vec![(consumer(4), group_uuid(0))]);
}

/// Deleting a group with members needs force; members leave with it, and the
/// index forgets them.
#[test]
fn a_group_with_members_is_deleted_only_by_force() {
    let mut rng = Rng::new(2);
    let mut s = State::new();
    let (_, changes) = s
        .plan_create_server_group(random_group(&mut rng, 0), 0)
        .unwrap();
    s.apply(&changes);
    let (_, changes) = s
        .plan_server_group_members(&group_uuid(0), &[consumer(1), consumer(1)], &[], 0)
        .unwrap();
    s.apply(&changes);
    assert_eq!(s.groups_of(&consumer(1)), &[group_uuid(0)]);
    assert!(s.plan_delete_server_group(&group_uuid(0), false).is_err());
    let ((), changes) = s.plan_delete_server_group(&group_uuid(0), true).unwrap();
    s.apply(&changes);
    assert!(s.groups_of(&consumer(1)).is_empty());
    assert!(s.check_usage_index());
    assert!(matches!(
        s.plan_delete_server_group(&group_uuid(0), true),
        Err(Error::NotFound(_))
    ));
}
