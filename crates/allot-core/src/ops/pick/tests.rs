//! Pick-and-claim on small worlds: the server's choice never over-commits, follows the
//! candidate search, keeps affinity rules and refuses whole when asked to.

use super::*;
use crate::candidates::{RequestGroup, Sort, Weigh};
use crate::model::Inventory;
use crate::names::{ResourceClass, TraitName};
use crate::testing::new_provider;

fn vcpu() -> ResourceClass {
    ResourceClass::new_unchecked("VCPU")
}

/// `roots` roots of `vcpus` VCPU each, provider ids 1..=roots.
fn flat(roots: u64, vcpus: u64) -> State {
    let mut s = State::new();
    let mut changes = Vec::new();
    for id in 1..=roots {
        changes.push(new_provider(id, Uuid::from_u128(id.into()), None, 0));
        changes.push(Change::SetInventories(
            ProviderId(id),
            vec![(vcpu(), Inventory::with_total(vcpus))],
        ));
    }
    s.apply(&changes);
    s
}

use crate::testing::pick_claim as claim;

fn pick(amount: u64, instances: u128, affinity: Affinity, partial: bool) -> Pick {
    Pick {
        query: CandidateQuery {
            groups: vec![RequestGroup {
                resources: vec![(RequestedName::Name(vcpu()), amount)],
                ..Default::default()
            }],
            nested_aware: true,
            ..Default::default()
        },
        options: SearchOptions::default(),
        claims: (0..instances).map(claim).collect(),
        affinity,
        partial,
        shapes: Vec::new(),
        together: false,
    }
}

/// The roots the claims of a pick stand on, in order.
fn roots(placed: &Placed) -> Vec<u128> {
    placed
        .claims
        .iter()
        .map(|c| c.allocations[0].provider.as_u128())
        .collect()
}

fn over_committed(s: &State) -> bool {
    s.providers().any(|p| {
        p.inventories
            .iter()
            .any(|(class, inv)| i128::from(p.used(class.as_str(), 0)) > inv.capacity())
    })
}

#[test]
fn picks_fill_the_cloud_exactly_and_never_over_commit() {
    // 5 providers of 20 VCPU: exactly 100 single-VCPU picks succeed, one after another
    // on the view each left.
    let mut s = flat(5, 20);
    let mut accepted = 0;
    for n in 0..120 {
        let mut one = pick(1, 1, Affinity::None, false);
        one.claims = vec![claim(n)];
        match s.plan_pick(one, 0) {
            Ok((placed, changes)) => {
                assert_eq!(placed.claims.len(), 1);
                s.apply(&changes);
                accepted += 1;
            }
            Err(Error::Conflict { code, message }) => {
                assert_eq!(code, ConflictCode::ClaimDoesNotFit);
                assert!(
                    message.contains("No allocation candidate fits"),
                    "{message}"
                );
            }
            Err(e) => panic!("{e}"),
        }
        assert!(!over_committed(&s));
    }
    assert_eq!(accepted, 100);
}

#[test]
fn a_pick_takes_the_first_candidate_of_the_weighed_order() {
    let mut s = flat(3, 8);
    // Root 2 is the most used.
    let mut busy = pick(5, 1, Affinity::None, false);
    busy.claims = vec![claim(99)];
    busy.query.groups[0].in_tree = Some(Uuid::from_u128(2).into());
    let (_, changes) = s.plan_pick(busy, 0).unwrap();
    s.apply(&changes);
    let first = |sort: Option<Sort>| {
        let mut p = pick(1, 1, Affinity::None, false);
        p.query.weigh = Weigh {
            sort,
            prefer: Vec::<RequestedName<TraitName>>::new(),
        };
        roots(&s.plan_pick(p, 0).unwrap().0)
    };
    assert_eq!(first(None), [1], "the search's order: creation order");
    assert_eq!(first(Some(Sort::Pack)), [2], "the most used first");
    assert_eq!(
        first(Some(Sort::Spread)),
        [1],
        "the least used first (1 and 3 tie)"
    );
}

#[test]
fn different_roots_refuses_whole_or_places_one_per_root() {
    let s = flat(150, 4);
    let e = s
        .plan_pick(pick(1, 200, Affinity::DifferentRoots, false), 0)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("Only 150 of 200 instances fit the request each on a root of its own"),
        "{e}"
    );
    let (placed, changes) = s
        .plan_pick(pick(1, 200, Affinity::DifferentRoots, true), 0)
        .unwrap();
    assert_eq!(placed.claims.len(), 150);
    assert_eq!(placed.unplaced.len(), 50);
    assert_eq!(
        placed.unplaced[0],
        claim(150).consumer,
        "the later ones wait"
    );
    let distinct: BTreeSet<u128> = roots(&placed).into_iter().collect();
    assert_eq!(distinct.len(), 150, "one per root");
    let mut after = s.clone();
    after.apply(&changes);
    assert!(!over_committed(&after));
    // Without the rule the same 200 fit (4 VCPU a root).
    assert_eq!(
        s.plan_pick(pick(1, 200, Affinity::None, false), 0)
            .unwrap()
            .0
            .claims
            .len(),
        200
    );
}

#[test]
fn same_root_keeps_a_group_together_or_refuses_it() {
    let mut s = flat(3, 4);
    // Root 1 has 1 VCPU left, root 2 has 4, root 3 has 2.
    for (root, used) in [(1u128, 3u64), (3, 2)] {
        let mut p = pick(used, 1, Affinity::None, false);
        p.claims = vec![claim(1000 + root)];
        p.query.groups[0].in_tree = Some(Uuid::from_u128(root).into());
        let (_, changes) = s.plan_pick(p, 0).unwrap();
        s.apply(&changes);
    }
    // A group of 3 fits only on root 2, though root 1 comes first.
    let (placed, _) = s
        .plan_pick(pick(1, 3, Affinity::SameRoot, false), 0)
        .unwrap();
    assert_eq!(roots(&placed), [2, 2, 2]);
    // A group of 5 fits nowhere: refused whole, or 4 of it on root 2.
    let e = s
        .plan_pick(pick(1, 5, Affinity::SameRoot, false), 0)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("Only 4 of 5 instances fit the request on one root"),
        "{e}"
    );
    let (placed, _) = s
        .plan_pick(pick(1, 5, Affinity::SameRoot, true), 0)
        .unwrap();
    assert_eq!(roots(&placed), [2, 2, 2, 2]);
    assert_eq!(placed.unplaced, [claim(4).consumer]);
}

#[test]
fn a_pick_lands_only_where_the_search_offers() {
    // Random small flat worlds with some usage and a trait: every pick's allocation is
    // one of the candidates the same query offers on the same view.
    let mut rng = crate::candidates::Rng::new(5);
    for case in 0..300 {
        let mut s = flat(1 + rng.below(6) as u64, 1 + rng.below(6) as u64);
        let amount = 1 + rng.below(3) as u64;
        for n in 0..rng.below(12) {
            let mut p = pick(amount, 1, Affinity::None, false);
            p.claims = vec![claim(n as u128)];
            p.query.weigh.sort = [None, Some(Sort::Pack), Some(Sort::Spread)][rng.below(3)];
            let offered = s.allocation_candidates(&p.query, &p.options).unwrap();
            match s.plan_pick(p, 0) {
                Ok((placed, changes)) => {
                    let got = &placed.claims[0].allocations;
                    assert!(
                        offered
                            .requests
                            .iter()
                            .any(|r| r.allocations.len() == got.len()
                                && r.allocations.iter().zip(got).all(|(&(id, k, a), g)| {
                                    s.provider(id).unwrap().uuid() == g.provider
                                        && offered.classes[k] == g.class
                                        && a == g.amount
                                })),
                        "case {case}: {got:?} not offered"
                    );
                    s.apply(&changes);
                }
                Err(_) => assert!(offered.requests.is_empty(), "case {case}"),
            }
            assert!(!over_committed(&s));
        }
    }
}
