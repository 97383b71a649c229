//! Tests of the holders' listing, the audit and the removal of what it found.

use super::*;
use crate::model::{Allocation, ConsumerRow, Inventory};
use crate::names::RequestedName;
use crate::ops::allocations::Requested;
use crate::ops::claims::NewClaim;
use crate::testing::{new_provider, rc};

/// Two roots (1, 2) and a child of root 1 (3), each with 100 VCPU; consumers
/// 10..=19 hold 1 VCPU each, the even ones on root 1's child, the odd ones on root 2,
/// typed INSTANCE, in project `p` (10..=14) or `q`, created at 5 and changed at 10.
fn world() -> State {
    let mut s = State::new();
    let mut changes = vec![
        new_provider(1, Uuid::from_u128(1), None, 0),
        new_provider(2, Uuid::from_u128(2), None, 0),
        new_provider(3, Uuid::from_u128(3), Some(1), 0),
    ];
    for id in 1..=3 {
        changes.push(Change::SetInventories(
            ProviderId(id),
            vec![(rc("VCPU"), Inventory::with_total(100))],
        ));
    }
    for c in 10..=19u128 {
        let uuid = Uuid::from_u128(c);
        changes.push(Change::PutConsumer {
            row: ConsumerRow {
                uuid,
                project_id: if c < 15 { "p" } else { "q" }.into(),
                user_id: "u".into(),
                consumer_type: Some("INSTANCE".into()),
                generation: 1,
                created_at: 5,
                updated_at: 10,
            },
            previous_generation: None,
        });
        let provider = ProviderId(if c % 2 == 0 { 3 } else { 2 });
        changes.push(Change::SetAllocations(
            uuid,
            vec![Allocation {
                provider,
                class: rc("VCPU"),
                used: 1,
            }],
        ));
    }
    s.apply(&changes);
    s
}

/// A live claim of 2 VCPU on root 2 for `consumer`, made at 10, expiring at 100.
fn claim(s: &mut State, uuid: u128, consumer: u128) {
    let new = NewClaim {
        uuid: Uuid::from_u128(uuid),
        consumer: Uuid::from_u128(consumer),
        project_id: "r".into(),
        user_id: "v".into(),
        consumer_type: None,
        tag: None,
        allocations: vec![Requested {
            provider: Uuid::from_u128(2).into(),
            class: RequestedName::Name(rc("VCPU")),
            used: 2,
        }],
        expires_at: Some(100),
        server_group: None,
    };
    let (_, changes) = s.plan_create_claim(new, 10).unwrap();
    s.apply(&changes);
}

fn uuids(holders: &[Holder]) -> Vec<u128> {
    holders.iter().map(|h| h.uuid.as_u128()).collect()
}

#[test]
fn holders_are_listed_in_uuid_order_by_pages_and_filters() {
    let mut s = world();
    claim(&mut s, 900, 30);
    claim(&mut s, 901, 11);
    let all = HolderFilter::default();
    let page = s.list_holders(&all, 20, None, 4);
    assert_eq!(uuids(&page), [10, 11, 12, 13]);
    let next = s.list_holders(&all, 20, Some(&Uuid::from_u128(13)), 100);
    assert_eq!(uuids(&next), [14, 15, 16, 17, 18, 19, 30]);
    // A claim-only consumer carries its claim's owner; a claimed one both totals.
    let only = &next[6];
    assert_eq!((only.project_id.as_str(), only.generation), ("r", None));
    assert_eq!(only.pending.get("VCPU"), Some(&2));
    assert_eq!(page[1].allocations.get("VCPU"), Some(&1));
    assert_eq!(page[1].pending.get("VCPU"), Some(&2));
    assert_eq!(page[1].providers, [Uuid::from_u128(2)]);
    let with = |f: HolderFilter| uuids(&s.list_holders(&f, 20, None, 100));
    let pending = HolderFilter {
        holding: Holding::Pending,
        ..Default::default()
    };
    assert_eq!(with(pending), [11, 30]);
    let both = HolderFilter {
        holding: Holding::Both,
        ..Default::default()
    };
    assert_eq!(with(both), [11]);
    let tree = HolderFilter {
        tree: Some(ProviderId(1)),
        project_id: Some("q".into()),
        ..Default::default()
    };
    assert_eq!(with(tree), [16, 18]);
    let on_child = HolderFilter {
        provider: Some(ProviderId(3)),
        consumer_type: Some("INSTANCE".into()),
        ..Default::default()
    };
    assert_eq!(with(on_child), [10, 12, 14, 16, 18]);
    // Past the claims' expiry, their consumers hold only what is allocated.
    assert_eq!(
        uuids(&s.list_holders(&all, 100, Some(&Uuid::from_u128(18)), 9)),
        [19]
    );
}

#[test]
fn the_audit_reports_the_holders_of_a_range_not_listed() {
    let mut s = world();
    claim(&mut s, 900, 30);
    let existing: Vec<Uuid> = [10, 12, 13, 15].map(Uuid::from_u128).to_vec();
    let range = UuidRange {
        from: Some(Uuid::from_u128(10)),
        to: Some(Uuid::from_u128(16)),
    };
    let (leaked, in_range) = s.leaked_holders(&range, &existing, 20);
    assert_eq!((uuids(&leaked), in_range), (vec![11, 14], 6));
    let (leaked, in_range) = s.leaked_holders(&UuidRange::default(), &existing, 20);
    assert_eq!(uuids(&leaked), [11, 14, 16, 17, 18, 19, 30]);
    assert_eq!(in_range, 11);
}

fn rules(listed_at: Timestamp) -> RemovalRules {
    RemovalRules {
        listed_at,
        types: vec![Some("INSTANCE".into()), Some("MIGRATION".into())],
        max_share: 0.5,
        force: false,
    }
}

#[test]
fn a_removal_takes_what_is_as_reported_and_names_the_rest() {
    let mut s = world();
    claim(&mut s, 900, 12);
    let asked = |uuids: &[u128]| -> Vec<Leaked> {
        uuids
            .iter()
            .map(|u| Leaked {
                uuid: Uuid::from_u128(*u),
                generation: 1,
            })
            .collect()
    };
    let mut wanted = asked(&[10, 11, 12, 40]);
    wanted[1].generation = 7;
    let (removal, changes) = s.plan_remove_leaked(&wanted, &rules(20), 20).unwrap();
    assert_eq!(removal.removed, [Uuid::from_u128(10)]);
    assert_eq!(
        removal.left,
        [
            (Uuid::from_u128(11), LeftBecause::Changed),
            (Uuid::from_u128(12), LeftBecause::LiveClaims),
            (Uuid::from_u128(40), LeftBecause::Gone),
        ]
    );
    s.apply(&changes);
    assert!(s.consumer(&Uuid::from_u128(10)).is_none());
    assert!(s.check_usage_index());
    // A list taken before the consumers last changed touches none of them.
    let (removal, _) = s.plan_remove_leaked(&asked(&[13]), &rules(10), 20).unwrap();
    assert_eq!(
        removal.left,
        [(Uuid::from_u128(13), LeftBecause::NewerThanList)]
    );
    // Types not named are left.
    let untyped = RemovalRules {
        types: vec![None],
        ..rules(20)
    };
    let (removal, _) = s.plan_remove_leaked(&asked(&[13]), &untyped, 20).unwrap();
    assert_eq!(removal.left, [(Uuid::from_u128(13), LeftBecause::Type)]);
}

#[test]
fn a_removal_past_its_share_is_refused_unless_forced() {
    let s = world();
    let six: Vec<Leaked> = (10..16)
        .map(|u| Leaked {
            uuid: Uuid::from_u128(u),
            generation: 1,
        })
        .collect();
    let refused = s.plan_remove_leaked(&six, &rules(20), 20).unwrap_err();
    assert!(
        matches!(&refused, Error::Conflict { message, .. } if message.contains("6 of the 10")),
        "{refused:?}"
    );
    let forced = RemovalRules {
        force: true,
        ..rules(20)
    };
    let (removal, changes) = s.plan_remove_leaked(&six, &forced, 20).unwrap();
    assert_eq!((removal.removed.len(), changes.len()), (6, 6));
    let (removal, _) = s.plan_remove_leaked(&six[..5], &rules(20), 20).unwrap();
    assert_eq!(removal.removed.len(), 5, "half is within a half");
}
