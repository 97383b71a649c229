//! Pending claims (an allot extension, every microversion): `POST /claims`,
//! `GET /claims[/{uuid}]`, `POST /claims/{uuid}/confirm`, and the pending totals of
//! `GET /resource_providers/{uuid}/pending` and `GET /pending`.
//!
//! Times are RFC 3339 strings in UTC to the second (`"2026-11-23T03:04:39Z"`), which
//! every language parses without help, where Placement's own bodies carry no times.
//!
//! The bodies are `allot-client`'s types ([`Claim`], [`ClaimList`], [`Pending`]):
//! the server writes its answers through the very types tools read them with, so the
//! two cannot drift. They own their strings where the rest of `wire` borrows from the
//! view: the few names a claim carries are short next to the uuids and times its body
//! always had to format.

use std::collections::BTreeMap;

pub use allot_client::{
    Claim, ClaimList, ClaimResources, ClaimState, PendingByRoot, Placed,
    ProviderPending as Pending, SoftRuleBroken,
};
use allot_core::{ResourceClass, Timestamp, Uuid};

use crate::auth::format_utc;

/// One claim, as every claim endpoint answers it: the claim as it is at `now` (a
/// pending claim past its expiry shows `expired`, ended at its expiry, whether or not
/// the sweeper has recorded it).
pub fn claim_body(claim: &allot_core::Claim, now: Timestamp) -> Claim {
    let mut allocations: BTreeMap<Uuid, ClaimResources> = BTreeMap::new();
    for a in claim.allocations.iter() {
        allocations
            .entry(a.provider)
            .or_default()
            .resources
            .insert(a.class.as_str().to_owned(), a.amount);
    }
    Claim {
        allocations,
        consumer_type: claim.consumer_type.as_deref().map(str::to_owned),
        consumer_uuid: claim.consumer,
        created_at: format_utc(claim.created_at),
        ended_at: claim.ended_at(now).map(format_utc),
        expires_at: claim.expires_at.map(format_utc),
        project_id: claim.project_id.to_string(),
        state: claim.state_at(now),
        tag: claim.tag.as_deref().map(str::to_owned),
        user_id: claim.user_id.to_string(),
        uuid: claim.uuid,
        extra: serde_json::Map::new(),
    }
}

/// A pick's instances placed against a soft server group rule.
pub fn soft_broken(pairs: &[(Uuid, Uuid)]) -> Vec<SoftRuleBroken> {
    pairs
        .iter()
        .map(|&(consumer_uuid, server_group)| SoftRuleBroken {
            consumer_uuid,
            server_group,
        })
        .collect()
}

/// Sums by class, by the classes' names.
pub fn by_name(sums: &BTreeMap<ResourceClass, u64>) -> BTreeMap<String, u64> {
    sums.iter()
        .map(|(c, n)| (c.as_str().to_owned(), *n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use allot_core::ClaimAmount;

    fn core_claim(
        uuid: u128,
        state: allot_core::ClaimState,
        expires_at: Option<Timestamp>,
        named: bool,
    ) -> allot_core::Claim {
        let amount = |provider: u128, class: &str, amount: u64| ClaimAmount {
            provider: Uuid::from_u128(provider),
            class: ResourceClass::new_unchecked(class),
            amount,
        };
        allot_core::Claim {
            uuid: Uuid::from_u128(uuid),
            consumer: Uuid::from_u128(100),
            project_id: "project".into(),
            user_id: "user".into(),
            consumer_type: named.then(|| "INSTANCE".into()),
            tag: named.then(|| "a \"tag\"".into()),
            allocations: vec![
                amount(7, "MEMORY_MB", 512),
                amount(7, "VCPU", 2),
                amount(8, "CUSTOM_GPU", 1),
            ]
            .into(),
            state,
            created_at: 1_700_000_000,
            expires_at,
            ended_at: (state != allot_core::ClaimState::Pending).then_some(1_700_000_060),
        }
    }

    /// Every claim answer, written through the shared types exactly as a handler
    /// writes it, reads back with the client's parsing into the same value.
    #[test]
    fn every_answer_round_trips_through_the_client() {
        use allot_core::ClaimState as Core;
        let now = 1_700_000_030;
        let claims = [
            core_claim(1, Core::Pending, Some(1_700_000_300), true),
            core_claim(2, Core::Pending, Some(now), false), // expired, not yet swept
            core_claim(3, Core::Pending, None, false),
            core_claim(4, Core::Confirmed, None, true),
            core_claim(5, Core::Released, Some(1_700_000_300), false),
            core_claim(6, Core::Expired, Some(1_700_000_010), true),
        ];
        let bodies: Vec<Claim> = claims.iter().map(|c| claim_body(c, now)).collect();
        for body in &bodies {
            let text = serde_json::to_string(body).unwrap();
            assert_eq!(
                serde_json::from_str::<Claim>(&text).unwrap(),
                *body,
                "{text}"
            );
        }
        assert_eq!(bodies[1].state, ClaimState::Expired);
        assert_eq!(bodies[1].ended_at.as_deref(), Some("2023-11-14T22:13:50Z"));

        let list = ClaimList { claims: bodies };
        let text = serde_json::to_string(&list).unwrap();
        assert_eq!(serde_json::from_str::<ClaimList>(&text).unwrap(), list);

        let sums = BTreeMap::from([
            (ResourceClass::new_unchecked("VCPU"), 3),
            (ResourceClass::new_unchecked("DISK_GB"), 10),
        ]);
        for pending in [
            Pending {
                consumers: Some(BTreeMap::from([
                    (Uuid::from_u128(100), by_name(&sums)),
                    (Uuid::from_u128(99), by_name(&sums)),
                ])),
                pending: by_name(&sums),
            },
            Pending {
                consumers: None,
                pending: by_name(&sums),
            },
            Pending::default(),
        ] {
            let text = serde_json::to_string(&pending).unwrap();
            assert_eq!(serde_json::from_str::<Pending>(&text).unwrap(), pending);
        }
    }

    /// The keys come sorted, as the claim bodies always had them, and nothing
    /// the client keeps for unknown fields leaks into what the server writes.
    #[test]
    fn a_claim_is_written_with_sorted_keys() {
        let claim = core_claim(1, allot_core::ClaimState::Confirmed, None, true);
        let text = serde_json::to_string(&claim_body(&claim, 1_700_000_030)).unwrap();
        let (seven, eight, one, consumer) = (
            Uuid::from_u128(7),
            Uuid::from_u128(8),
            Uuid::from_u128(1),
            Uuid::from_u128(100),
        );
        assert_eq!(
            text,
            format!(
                concat!(
                    r#"{{"allocations":{{"{seven}":{{"resources":{{"MEMORY_MB":512,"VCPU":2}}}},"#,
                    r#""{eight}":{{"resources":{{"CUSTOM_GPU":1}}}}}},"#,
                    r#""consumer_type":"INSTANCE","consumer_uuid":"{consumer}","#,
                    r#""created_at":"2023-11-14T22:13:20Z","ended_at":"2023-11-14T22:14:20Z","#,
                    r#""expires_at":null,"project_id":"project","state":"confirmed","#,
                    r#""tag":"a \"tag\"","user_id":"user","uuid":"{one}"}}"#,
                ),
                seven = seven,
                eight = eight,
                consumer = consumer,
                one = one,
            )
        );
        let pending = Pending {
            consumers: Some(BTreeMap::from([(
                consumer,
                BTreeMap::from([("VCPU".into(), 1)]),
            )])),
            pending: BTreeMap::from([("VCPU".into(), 1)]),
        };
        assert_eq!(
            serde_json::to_string(&pending).unwrap(),
            format!(r#"{{"consumers":{{"{consumer}":{{"VCPU":1}}}},"pending":{{"VCPU":1}}}}"#)
        );
    }

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_utc(1_795_402_079), "2026-11-23T02:47:59Z");
        assert_eq!(format_utc(-1), "1969-12-31T23:59:59Z");
        assert_eq!(format_utc(4_102_444_800), "2100-01-01T00:00:00Z");
    }
}
