//! Drains on a small nested world with a sharing pool: consumers move as one plan,
//! keep what they hold on the pool, keep their groups' rules (an affinity group on
//! the drained root moves whole), and the drain's end puts everything back.

use super::*;
use crate::model::Inventory;
use crate::ops::allocations::{ConsumerGeneration, ConsumerWrite, Endpoint, Requested};
use crate::ops::server_groups::NewServerGroup;
use crate::server_groups::{Policy, Scope};
use crate::testing::{new_provider, rc, tn};

const POOL: u64 = 100;

fn puuid(id: u64) -> Uuid {
    Uuid::from_u128(0x1000 + u128::from(id))
}

fn consumer(n: u128) -> Uuid {
    Uuid::from_u128(0xc000 + n)
}

/// Roots 1..=4, each with VCPU 8 on the root and a NIC child (id + 10) with 4 VFs,
/// all in one aggregate with a disk pool of 1,000 GB.
fn world() -> State {
    let agg = Uuid::from_u128(0xa1);
    let mut s = State::new();
    let mut changes = vec![
        new_provider(POOL, puuid(POOL), None, 0),
        Change::SetInventories(
            ProviderId(POOL),
            vec![(rc("DISK_GB"), Inventory::with_total(1000))],
        ),
        Change::SetTraits(ProviderId(POOL), vec![tn(SHARING_TRAIT)]),
        Change::SetAggregates(ProviderId(POOL), vec![agg]),
    ];
    for r in 1..=4 {
        changes.push(new_provider(r, puuid(r), None, 0));
        changes.push(new_provider(r + 10, puuid(r + 10), Some(r), 0));
        changes.push(Change::SetInventories(
            ProviderId(r),
            vec![(rc("VCPU"), Inventory::with_total(8))],
        ));
        changes.push(Change::SetInventories(
            ProviderId(r + 10),
            vec![(rc("SRIOV_NET_VF"), Inventory::with_total(4))],
        ));
        changes.push(Change::SetAggregates(ProviderId(r), vec![agg]));
    }
    s.apply(&changes);
    s
}

/// Consumer `n` holding `vcpu` on root `root`, a VF on its NIC and 10 GB of the pool.
fn place(s: &mut State, n: u128, root: u64, vcpu: u64) {
    let amount = |provider: u64, class: &str, used| Requested {
        provider: puuid(provider).into(),
        class: RequestedName::Name(rc(class)),
        used,
    };
    let write = ConsumerWrite {
        consumer: consumer(n),
        project_id: "p".into(),
        user_id: "u".into(),
        consumer_type: Some("INSTANCE".into()),
        generation: ConsumerGeneration::Unchecked,
        allocations: vec![
            amount(root, "VCPU", vcpu),
            amount(root + 10, "SRIOV_NET_VF", 1),
            amount(POOL, "DISK_GB", 10),
        ],
    };
    let ((), changes) = s.plan_allocations(&[write], Endpoint::Put, 0).unwrap();
    s.apply(&changes);
}

fn group(s: &mut State, n: u128, policy: Policy, members: &[u128]) {
    let new = NewServerGroup {
        uuid: Uuid::from_u128(0x6000 + n),
        name: format!("g{n}"),
        project_id: "p".into(),
        user_id: "u".into(),
        policy,
        max_per_domain: 1,
        scope: Scope::Root,
        enforce_on_allocations: false,
    };
    let members: Vec<Uuid> = members.iter().map(|&m| consumer(m)).collect();
    let (_, changes) = s.plan_put_server_group(new, &members, 0).unwrap();
    s.apply(&changes);
}

fn drain_of(roots: &[u64], disable: bool) -> NewDrain {
    NewDrain {
        uuid: Uuid::from_u128(0xd0),
        roots: roots.iter().map(|&r| puuid(r)).collect(),
        consumers: None,
        requests: BTreeMap::new(),
        required: Vec::new(),
        partial: false,
        weigh: Weigh::default(),
        expires_at: None,
        disable,
        options: SearchOptions::default(),
    }
}

fn draw() -> impl FnMut() -> Uuid {
    let mut n = 0u128;
    move || {
        n += 1;
        Uuid::from_u128(0xc1a1_0000 + n)
    }
}

/// The roots a consumer's allocations stand on.
fn roots_of(s: &State, n: u128) -> Vec<u64> {
    let mut roots: Vec<u64> = s
        .consumer(&consumer(n))
        .unwrap()
        .allocations
        .iter()
        .map(|a| s.provider(a.provider).unwrap().row.root.0)
        .collect();
    roots.sort_unstable();
    roots.dedup();
    roots
}

#[test]
fn a_drain_moves_every_consumer_keeping_its_pool_and_its_groups() {
    let mut s = world();
    // Root 1 holds five consumers: an affinity group of two (entirely there), an
    // anti-affinity group with a member on root 2, and one alone.
    for (n, vcpu) in [(1, 2), (2, 2), (3, 1), (4, 1)] {
        place(&mut s, n, 1, vcpu);
    }
    place(&mut s, 5, 2, 1);
    place(&mut s, 6, 3, 1);
    group(&mut s, 1, Policy::Affinity, &[1, 2]);
    group(&mut s, 2, Policy::AntiAffinity, &[3, 5, 6]);
    let before = s.clone();
    let (drained, changes) = s.plan_drain(drain_of(&[1], true), &mut draw(), 10).unwrap();
    assert!(drained.unplaced.is_empty(), "{:?}", drained.unplaced);
    assert_eq!(drained.claims.len(), 4);
    assert!(
        !changes
            .iter()
            .any(|c| matches!(c, Change::SetAllocations(..))),
        "the sources stay until confirm"
    );
    s.apply(&changes);
    assert!(s.check_usage_index());
    // Each claim is what the consumer adds on its target: VCPU and a VF in one
    // tree other than root 1's, nothing on the pool.
    let target = |n: u128| {
        let claim = drained
            .claims
            .iter()
            .find(|c| c.consumer == consumer(n))
            .unwrap();
        let roots: BTreeSet<u64> = claim
            .allocations
            .iter()
            .map(|a| s.provider_by_uuid(&a.provider).unwrap().row.root.0)
            .collect();
        assert_eq!(roots.len(), 1, "{claim:?}");
        assert!(claim.allocations.iter().all(|a| a.provider != puuid(POOL)));
        assert_eq!(claim.allocations.len(), 2, "{claim:?}");
        *roots.iter().next().unwrap()
    };
    assert_ne!(target(1), 1);
    assert_eq!(target(1), target(2), "the affinity group moves whole");
    assert!(
        ![2, 3].contains(&target(3)),
        "apart from the anti-affinity members: {:?}",
        (1..=4).map(target).collect::<Vec<_>>()
    );
    // Root 1 takes nothing new, and is marked disabled.
    assert!(s.is_drained(ProviderId(1)));
    assert!(s
        .provider(ProviderId(1))
        .unwrap()
        .traits
        .contains(DISABLED_TRAIT));
    let claim = NewClaim {
        allocations: vec![Requested {
            provider: puuid(1).into(),
            class: RequestedName::Name(rc("VCPU")),
            used: 1,
        }],
        ..crate::testing::pick_claim(99)
    };
    assert!(s.plan_create_claim(claim, 10).is_err());

    // Confirmed: each consumer holds its target and its pool share, nothing on root 1.
    let (ended, changes) = s.plan_confirm_drain(&drained.drain.uuid, 20).unwrap();
    assert_eq!(ended.state, DrainState::Confirmed);
    let mut confirmed = s.clone();
    confirmed.apply(&changes);
    assert!(confirmed.check_usage_index());
    for n in 1..=4 {
        assert_eq!(
            roots_of(&confirmed, n),
            vec![target(n), POOL],
            "consumer {n}"
        );
    }
    assert_eq!(confirmed.used(ProviderId(POOL), &rc("DISK_GB"), 20), 60);
    assert_eq!(confirmed.used(ProviderId(1), &rc("VCPU"), 20), 0);
    // The host stays in maintenance until the drain is deleted.
    let disabled = |s: &State| {
        s.provider(ProviderId(1))
            .unwrap()
            .traits
            .contains(DISABLED_TRAIT)
    };
    assert!(confirmed.is_drained(ProviderId(1)) && disabled(&confirmed));
    let ((), changes) = confirmed
        .plan_abandon_drain(&drained.drain.uuid, 30)
        .unwrap();
    let mut ended = confirmed.clone();
    ended.apply(&changes);
    assert!(!ended.is_drained(ProviderId(1)) && !disabled(&ended));
    assert_eq!(
        roots_of(&ended, 1),
        roots_of(&confirmed, 1),
        "the moves stay"
    );
    for g in [1, 2] {
        let group = confirmed
            .server_group(&Uuid::from_u128(0x6000 + g))
            .unwrap();
        assert_eq!(confirmed.group_broken(&group.rule(), &group.members, 20), 0);
    }

    // Abandoned instead: everything as it was, claims released.
    let ((), changes) = s.plan_abandon_drain(&drained.drain.uuid, 20).unwrap();
    let mut abandoned = s.clone();
    abandoned.apply(&changes);
    assert!(abandoned.drains().next().is_none());
    assert!(!abandoned.is_drained(ProviderId(1)));
    for n in 1..=5 {
        assert_eq!(roots_of(&abandoned, n), roots_of(&before, n));
    }
    for p in before.providers() {
        assert_eq!(p.traits, abandoned.provider(p.id()).unwrap().traits);
        for (class, _) in p.inventories.iter() {
            assert_eq!(
                before.used(p.id(), class, 20),
                abandoned.used(p.id(), class, 20)
            );
        }
    }
}

#[test]
fn a_drain_that_cannot_place_everyone_names_them_or_refuses_whole() {
    let mut s = world();
    // Root 1 holds 8 VCPU worth; the other three roots have room for 6 of it.
    for n in 1..=4 {
        place(&mut s, n, 1, 2);
    }
    for r in 2..=4 {
        place(&mut s, 10 + u128::from(r), r, 6);
    }
    let refused = s.plan_drain(drain_of(&[1], false), &mut draw(), 0);
    match refused {
        Err(Error::Conflict { code, message }) => {
            assert_eq!(code, ConflictCode::ClaimDoesNotFit);
            assert!(message.contains("Only 3 of 4"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let mut partial = drain_of(&[1], false);
    partial.partial = true;
    let (drained, _) = s.plan_drain(partial, &mut draw(), 0).unwrap();
    assert_eq!(drained.claims.len(), 3);
    assert_eq!(drained.unplaced.len(), 1);
    assert!(
        drained.unplaced[0].1.contains("capacity"),
        "{:?}",
        drained.unplaced
    );
    // A root holding another open drain's targets waits for that drain's end.
    let target = s
        .provider_by_uuid(&drained.claims[0].allocations[0].provider)
        .unwrap()
        .row
        .root;
    let mut applied = s.clone();
    let (_, changes) = {
        let mut partial = drain_of(&[1], false);
        partial.partial = true;
        s.plan_drain(partial, &mut draw(), 0).unwrap()
    };
    applied.apply(&changes);
    let mut second = drain_of(&[target.0], false);
    second.uuid = Uuid::from_u128(0xd1);
    match applied.plan_drain(second, &mut draw(), 0) {
        Err(Error::Conflict { message, .. }) => {
            assert!(message.contains("holds targets"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // Bad requests.
    assert!(matches!(
        s.plan_drain(drain_of(&[11], false), &mut draw(), 0),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        s.plan_drain(drain_of(&[], false), &mut draw(), 0),
        Err(Error::Invalid(_))
    ));
}

/// Headroom counts what picks would place: none on a root being drained, and the
/// root's room again once the drain is deleted.
#[test]
fn headroom_leaves_out_a_drained_root() {
    let mut s = world();
    place(&mut s, 1, 1, 2);
    let query = CandidateQuery {
        groups: vec![crate::candidates::RequestGroup {
            resources: vec![(crate::names::ResourceClass::requested("VCPU"), 1)],
            ..Default::default()
        }],
        ..Default::default()
    };
    let options = SearchOptions::default();
    let before = s.headroom(&query, &options).unwrap();
    assert_eq!(before.total, 30, "{before:?}");
    let (drain, changes) = s.plan_drain(drain_of(&[1], false), &mut draw(), 0).unwrap();
    s.apply(&changes);
    let during = s.headroom(&query, &options).unwrap();
    // Root 1's consumer moved (pending) to another root: 32 - 8 on root 1 - 2 moved.
    assert_eq!(during.total, 22, "{during:?}");
    assert!(during
        .by_anchor
        .iter()
        .all(|&(root, _)| root != ProviderId(1)));
    let ((), changes) = s.plan_abandon_drain(&drain.drain.uuid, 0).unwrap();
    s.apply(&changes);
    assert_eq!(s.headroom(&query, &options).unwrap(), before);
}
