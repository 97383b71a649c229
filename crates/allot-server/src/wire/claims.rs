//! Pending claims (an allot extension, every microversion): `POST /claims`,
//! `GET /claims[/{uuid}]`, `POST /claims/{uuid}/confirm`, and the pending totals of
//! `GET /resource_providers/{uuid}/pending` and `GET /pending`.
//!
//! Times are RFC 3339 strings in UTC to the second (`"2026-11-23T03:04:39Z"`), which
//! every language parses without help, where Placement's own bodies carry no times.

use std::collections::BTreeMap;

use allot_core::{Claim, Timestamp};
use serde::Serialize;

use super::Nullable;

/// One claim, as every claim endpoint answers it.
#[derive(Debug, Serialize)]
pub struct ClaimBody<'a> {
    /// What is promised, in the dict form of Placement's allocation bodies (1.12).
    pub allocations: BTreeMap<String, ClaimResources<'a>>,
    /// The consumer's type (Placement 1.38), or `null`.
    pub consumer_type: Nullable<&'a str>,
    /// The consumer the resources are promised to.
    pub consumer_uuid: String,
    /// When the claim was made.
    pub created_at: String,
    /// When it was confirmed, released or expired; `null` while pending.
    pub ended_at: Nullable<String>,
    /// When it stops counting; `null` for never.
    pub expires_at: Nullable<String>,
    /// The consumer's project.
    pub project_id: &'a str,
    /// The state at the time of the answer: `pending`, `confirmed`, `released`,
    /// `expired`.
    pub state: &'static str,
    /// The caller's free text, or `null`.
    pub tag: Nullable<&'a str>,
    /// The consumer's user.
    pub user_id: &'a str,
    /// The claim's own id.
    pub uuid: String,
}

/// A provider's part of a claim.
#[derive(Debug, Serialize)]
pub struct ClaimResources<'a> {
    /// Amounts by class.
    pub resources: BTreeMap<&'a str, u64>,
}

impl<'a> ClaimBody<'a> {
    /// The claim as it is at `now` (a pending claim past its expiry shows `expired`,
    /// ended at its expiry, whether or not the sweeper has recorded it).
    pub fn new(claim: &'a Claim, now: Timestamp) -> Self {
        let mut allocations: BTreeMap<String, ClaimResources<'a>> = BTreeMap::new();
        for a in claim.allocations.iter() {
            allocations
                .entry(a.provider.to_string())
                .or_insert_with(|| ClaimResources {
                    resources: BTreeMap::new(),
                })
                .resources
                .insert(a.class.as_str(), a.amount);
        }
        ClaimBody {
            allocations,
            consumer_type: claim.consumer_type.as_deref(),
            consumer_uuid: claim.consumer.to_string(),
            created_at: rfc3339(claim.created_at),
            ended_at: claim.ended_at(now).map(rfc3339),
            expires_at: claim.expires_at.map(rfc3339),
            project_id: &claim.project_id,
            state: claim.state_at(now).as_str(),
            tag: claim.tag.as_deref(),
            user_id: &claim.user_id,
            uuid: claim.uuid.to_string(),
        }
    }
}

/// `GET /claims`.
#[derive(Debug, Serialize)]
pub struct ClaimList<'a> {
    /// The claims, oldest first (then by uuid).
    pub claims: Vec<ClaimBody<'a>>,
}

/// `GET /resource_providers/{uuid}/pending` and `GET /pending`.
#[derive(Debug, Serialize)]
pub struct Pending<'a> {
    /// With `?detail=consumers` (provider only): the same sums per consumer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumers: Option<BTreeMap<String, BTreeMap<&'a str, u64>>>,
    /// What live claims promise, by class.
    pub pending: BTreeMap<&'a str, u64>,
}

/// A time as RFC 3339 in UTC, to the second: `2026-11-23T03:04:39Z`.
pub fn rfc3339(t: Timestamp) -> String {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// The proleptic Gregorian date of a count of days since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`: eras of 400 years, years starting in March so that
/// the leap day comes last).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March first
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_402_079), "2026-11-23T02:47:59Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59Z");
        assert_eq!(rfc3339(4_102_444_800), "2100-01-01T00:00:00Z");
    }
}
