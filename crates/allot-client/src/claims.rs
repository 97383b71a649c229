//! Typed calls for allot's pending claims (an extension, issue 10; `docs/api.md`,
//! "Pending claims"): create, list (one page or every page), show, confirm, release
//! one or all of a consumer's, and the pending totals per provider or per consumer and
//! project.
//!
//! The types mirror the wire, not allot's model: timestamps stay the RFC 3339 strings
//! the server wrote (the client has no date library and needs none), and a field the
//! server adds later is kept in `extra`, so that a tool printing the JSON it got back
//! prints all of it. The answer types (`Claim`, `ClaimList`, `ProviderPending`) are
//! also the ones the server serializes its answers through, so they are the wire
//! contract itself, not a copy of it. The calls answer at every microversion; against
//! OpenStack Placement they are 404s like any unknown URL.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};
use uuid::Uuid;

pub use allot_core::ClaimState;

use crate::{path_segment, Client, Error, Method, Result, StatusCode};

/// What one claim promises on one provider: `{"resources": {CLASS: amount}}`, the
/// Placement 1.12+ allocation form.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimResources {
    /// Amount per resource class.
    pub resources: BTreeMap<String, u64>,
}

/// A claim as the server answers it, and the type the server writes it through
/// (`allot-server`'s `wire::claims`), so that the two cannot drift.
///
/// Fields are declared in alphabetical order: serde writes them in declaration
/// order, and the server's claim bodies have always had sorted keys (as Placement's
/// own bodies do). `extra` comes last and is empty in what the server writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    /// What is promised, per provider.
    pub allocations: BTreeMap<Uuid, ClaimResources>,
    /// The consumer's type, if it was given (`null` otherwise).
    pub consumer_type: Option<String>,
    /// The consumer the resources are promised to.
    pub consumer_uuid: Uuid,
    /// When it was made (RFC 3339, UTC, to the second).
    pub created_at: String,
    /// When it was confirmed, released or seen expired (`None` while pending).
    pub ended_at: Option<String>,
    /// When it stops counting (`None`: never).
    pub expires_at: Option<String>,
    /// The consumer's project.
    pub project_id: String,
    /// Where the claim is in its life (by its API name, `pending`, ...).
    #[serde(with = "state_name")]
    pub state: ClaimState,
    /// Free text the caller interprets.
    pub tag: Option<String>,
    /// The consumer's user.
    pub user_id: String,
    /// The claim's own id.
    pub uuid: Uuid,
    /// Any field the server has beyond these, kept as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A claim's state on the wire: its API name. The core's own serde form is the
/// variant's name, which its change log keeps; the API has always said `pending`.
mod state_name {
    use serde::{de::Error as _, Deserialize, Deserializer, Serializer};

    use super::ClaimState;

    pub fn serialize<S: Serializer>(state: &ClaimState, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(state.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ClaimState, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(D::Error::custom)
    }
}

/// When a new claim expires.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClaimExpiry {
    /// The server's default: `expires_in` left out.
    #[default]
    ServerDefault,
    /// Never: `"expires_in": null`.
    Never,
    /// This many seconds after it is made.
    After(u64),
}

impl ClaimExpiry {
    pub(crate) fn is_server_default(&self) -> bool {
        *self == ClaimExpiry::ServerDefault
    }
}

impl Serialize for ClaimExpiry {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            // Left out by `skip_serializing_if`; null should it ever be written alone.
            ClaimExpiry::ServerDefault | ClaimExpiry::Never => s.serialize_none(),
            ClaimExpiry::After(seconds) => s.serialize_u64(*seconds),
        }
    }
}

/// The body of `POST /claims`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewClaim {
    /// The consumer the resources are promised to.
    pub consumer_uuid: Uuid,
    /// The consumer's type (as in Placement 1.38), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer_type: Option<String>,
    /// The consumer's project.
    pub project_id: String,
    /// The consumer's user.
    pub user_id: String,
    /// What to promise, per provider; all of it fits or none is taken.
    pub allocations: BTreeMap<Uuid, ClaimResources>,
    /// When the claim expires.
    #[serde(skip_serializing_if = "ClaimExpiry::is_server_default")]
    pub expires_in: ClaimExpiry,
    /// Free text the caller interprets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// The server group the consumer joins with the claim (`docs/api.md`, "Server
    /// groups").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_group: Option<Uuid>,
}

/// A pick-and-claim (`POST /claims` with `request`): the server chooses where. One
/// consumer (`consumer_uuid`) or many (`consumers`, a mass start).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PickClaim {
    /// The one consumer, for a single claim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer_uuid: Option<Uuid>,
    /// The instances of a mass start, each `(consumer, tag)`.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "instances")]
    pub consumers: Option<Vec<(Uuid, Option<String>)>>,
    /// The consumers' type, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer_type: Option<String>,
    /// The consumers' project.
    pub project_id: String,
    /// The consumers' user.
    pub user_id: String,
    /// The query string of `GET /allocation_candidates`.
    pub request: String,
    /// `pack`, `spread` or `random`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sort: Option<String>,
    /// Preferred traits, comma-separated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefer: Option<String>,
    /// `none`, `different_roots` or `same_root` (with `consumers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<String>,
    /// Whether some instances may stay unplaced (with `consumers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial: Option<bool>,
    /// When the claims expire.
    #[serde(skip_serializing_if = "ClaimExpiry::is_server_default")]
    pub expires_in: ClaimExpiry,
    /// Free text the caller interprets (each instance's, unless its own is given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// The server group every instance joins with its claim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_group: Option<Uuid>,
}

/// `consumers` as the API takes them: `[{"consumer_uuid": U, "tag": T}, ...]`.
fn instances<S: Serializer>(
    consumers: &Option<Vec<(Uuid, Option<String>)>>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Instance<'a> {
        consumer_uuid: &'a Uuid,
        #[serde(skip_serializing_if = "Option::is_none")]
        tag: &'a Option<String>,
    }
    let list: Vec<Instance> = consumers
        .iter()
        .flatten()
        .map(|(consumer_uuid, tag)| Instance { consumer_uuid, tag })
        .collect();
    list.serialize(serializer)
}

/// Which claims `GET /claims` lists; `None` fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimFilter {
    /// Claims of this consumer.
    pub consumer_uuid: Option<Uuid>,
    /// Claims with an amount on this provider.
    pub resource_provider_uuid: Option<Uuid>,
    /// Claims of this project.
    pub project_id: Option<String>,
    /// Claims whose consumer has this type.
    pub consumer_type: Option<String>,
    /// Claims with this tag.
    pub tag: Option<String>,
    /// Claims in this state.
    pub state: Option<ClaimState>,
    /// Claims with an amount of this class.
    pub resource_class: Option<String>,
    /// At most this many (one page).
    pub limit: Option<u64>,
    /// Claims after this one (the last uuid of the previous page).
    pub marker: Option<Uuid>,
}

impl ClaimFilter {
    /// The query string (without `?`), parameters in the API document's order.
    pub fn query(&self) -> String {
        let pairs: [(&str, Option<String>); 9] = [
            ("consumer_uuid", self.consumer_uuid.map(|u| u.to_string())),
            (
                "resource_provider_uuid",
                self.resource_provider_uuid.map(|u| u.to_string()),
            ),
            ("project_id", self.project_id.clone()),
            ("consumer_type", self.consumer_type.clone()),
            ("tag", self.tag.clone()),
            ("state", self.state.map(|s| s.as_str().to_owned())),
            ("resource_class", self.resource_class.clone()),
            ("limit", self.limit.map(|l| l.to_string())),
            ("marker", self.marker.map(|u| u.to_string())),
        ];
        query_string(&pairs)
    }
}

/// `GET /resource_providers/{uuid}/pending` (what live pending claims hold on one
/// provider) and `GET /pending` (a consumer's or a project's totals, never with
/// `consumers`). Fields in alphabetical order, as the server writes them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderPending {
    /// Per consumer and class, when asked for (`detail=consumers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumers: Option<BTreeMap<Uuid, BTreeMap<String, u64>>>,
    /// Per class, summed over every live claim.
    pub pending: BTreeMap<String, u64>,
}

/// `GET /pending?group_by=root`: what live pending claims promise under each root,
/// its whole tree summed, by class; roots with nothing pending are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingByRoot {
    /// Per root, per class.
    pub roots: BTreeMap<Uuid, BTreeMap<String, u64>>,
}

/// `GET /claims`: one page of claims, oldest first (then by uuid).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClaimList {
    /// The claims.
    pub claims: Vec<Claim>,
}

/// `POST /claims` with `request` and `consumers` (pick-and-claim for a mass start):
/// the claims made, in the order of `consumers`, and the consumers that did not fit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Placed {
    /// The claims made.
    pub claims: Vec<Claim>,
    /// The consumers left without a claim (with `partial: true`).
    pub unplaced: Vec<Uuid>,
    /// The instances placed against a soft server group rule, because no root that
    /// keeps it fits (absent when none was).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub soft_rules_broken: Vec<SoftRuleBroken>,
}

/// An instance a pick placed against a soft rule of a server group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoftRuleBroken {
    /// The instance's consumer.
    pub consumer_uuid: Uuid,
    /// The group whose soft rule it breaks.
    pub server_group: Uuid,
}

#[derive(Deserialize)]
struct ProviderList {
    resource_providers: Vec<ProviderRef>,
}

#[derive(Deserialize)]
struct ProviderRef {
    uuid: Uuid,
}

/// How many claims a page holds when every page is asked for and the caller gave no
/// `limit`: large enough that a few thousand claims take a few requests.
const PAGE: u64 = 500;

impl Client {
    /// `POST /claims`: makes a pending claim; 201 with the claim. A claim that does
    /// not fit is an [`Error::Status`] 409 with code `allot.claim.does_not_fit` and a
    /// detail naming the provider and class.
    pub async fn create_claim(&self, claim: &NewClaim) -> Result<Claim> {
        let body = serde_json::to_value(claim).expect("a new claim always serialises");
        let response = self
            .expect(Method::POST, "/claims", Some(&body), &[StatusCode::CREATED])
            .await?;
        parse(Method::POST, "/claims", &response.body)
    }

    /// `POST /claims` with `request`: the claims the server chose, and the consumers
    /// it could not place (a single consumer's claim comes back as a list of one).
    pub async fn pick_claims(&self, pick: &PickClaim) -> Result<Placed> {
        let body = serde_json::to_value(pick).expect("a pick always serialises");
        let response = self
            .expect(Method::POST, "/claims", Some(&body), &[StatusCode::CREATED])
            .await?;
        if pick.consumers.is_some() {
            return parse(Method::POST, "/claims", &response.body);
        }
        let mut claim: Claim = parse(Method::POST, "/claims", &response.body)?;
        let soft_rules_broken = match claim.extra.remove("soft_rules_broken") {
            Some(list) => serde_json::from_value(list).map_err(|e| Error::Decode {
                method: Method::POST,
                path: "/claims".into(),
                message: e.to_string(),
            })?,
            None => Vec::new(),
        };
        Ok(Placed {
            claims: vec![claim],
            unplaced: Vec::new(),
            soft_rules_broken,
        })
    }

    /// `GET /claims?...`: one page of the claims `filter` selects, oldest first.
    pub async fn claims(&self, filter: &ClaimFilter) -> Result<Vec<Claim>> {
        let query = filter.query();
        let path = if query.is_empty() {
            "/claims".to_owned()
        } else {
            format!("/claims?{query}")
        };
        let list: ClaimList = self.typed(Method::GET, &path, None).await?;
        Ok(list.claims)
    }

    /// Every claim `filter` selects, page after page (`filter.limit` is the page
    /// size, 500 when unset; `filter.marker` where to start): a page shorter than
    /// asked for is the last.
    pub async fn all_claims(&self, filter: &ClaimFilter) -> Result<Vec<Claim>> {
        let mut filter = filter.clone();
        let page = filter.limit.unwrap_or(PAGE).max(1);
        filter.limit = Some(page);
        let mut all = Vec::new();
        loop {
            let claims = self.claims(&filter).await?;
            let full = claims.len() as u64 >= page;
            let last = claims.last().map(|c| c.uuid);
            all.extend(claims);
            match last {
                // A server that ignored the marker would hand the same page back
                // forever: stop rather than loop.
                Some(last) if full && filter.marker != Some(last) => filter.marker = Some(last),
                _ => return Ok(all),
            }
        }
    }

    /// `GET /claims/{uuid}`: one claim, whatever its state (404 when it never was).
    pub async fn claim(&self, uuid: Uuid) -> Result<Claim> {
        self.typed(Method::GET, &format!("/claims/{uuid}"), None)
            .await
    }

    /// `POST /claims/{uuid}/confirm`: the pending claim becomes allocations of its
    /// consumer, added to what it holds or, with `replace`, replacing them. A claim
    /// that ended otherwise is a 409 `allot.claim.not_pending`.
    pub async fn confirm_claim(&self, uuid: Uuid, replace: bool) -> Result<Claim> {
        let body = serde_json::json!({ "replace": replace });
        self.typed(
            Method::POST,
            &format!("/claims/{uuid}/confirm"),
            Some(&body),
        )
        .await
    }

    /// `DELETE /claims/{uuid}`: releases a pending claim (harmless on one that
    /// already ended; 404 only for a uuid that never was a claim).
    pub async fn release_claim(&self, uuid: Uuid) -> Result<()> {
        self.delete(&format!("/claims/{uuid}")).await
    }

    /// `DELETE /claims?consumer_uuid=...`: releases every pending claim of a consumer.
    pub async fn release_consumer_claims(&self, consumer: Uuid) -> Result<()> {
        self.delete(&format!("/claims?consumer_uuid={consumer}"))
            .await
    }

    /// A `DELETE` that answers 204 with no body.
    async fn delete(&self, path: &str) -> Result<()> {
        self.expect(Method::DELETE, path, None, &[StatusCode::NO_CONTENT])
            .await
            .map(drop)
    }

    /// `GET /resource_providers/{uuid}/pending`: the provider's pending totals, per
    /// consumer too when `detail`, over the providers below it too when `tree`.
    pub async fn provider_pending(
        &self,
        provider: Uuid,
        detail: bool,
        tree: bool,
    ) -> Result<ProviderPending> {
        let query = query_string(&[
            ("detail", detail.then(|| "consumers".to_owned())),
            ("tree", tree.then(|| "true".to_owned())),
        ]);
        let path = match query.is_empty() {
            true => format!("/resource_providers/{provider}/pending"),
            false => format!("/resource_providers/{provider}/pending?{query}"),
        };
        self.typed(Method::GET, &path, None).await
    }

    /// `GET /pending?consumer_uuid=...&project_id=...`: pending totals per class of a
    /// consumer, a project, or both (the server wants at least one); of one class
    /// only with `class`.
    pub async fn pending_totals(
        &self,
        consumer: Option<Uuid>,
        project: Option<&str>,
        class: Option<&str>,
    ) -> Result<BTreeMap<String, u64>> {
        let query = query_string(&[
            ("consumer_uuid", consumer.map(|u| u.to_string())),
            ("project_id", project.map(str::to_owned)),
            ("resource_class", class.map(str::to_owned)),
        ]);
        let totals: ProviderPending = self
            .typed(Method::GET, &format!("/pending?{query}"), None)
            .await?;
        Ok(totals.pending)
    }

    /// `GET /pending?group_by=root`: every root's pending totals in one answer, of a
    /// consumer or a project when given, of one class with `class`.
    pub async fn pending_by_root(
        &self,
        consumer: Option<Uuid>,
        project: Option<&str>,
        class: Option<&str>,
    ) -> Result<PendingByRoot> {
        let query = query_string(&[
            ("group_by", Some("root".to_owned())),
            ("consumer_uuid", consumer.map(|u| u.to_string())),
            ("project_id", project.map(str::to_owned)),
            ("resource_class", class.map(str::to_owned)),
        ]);
        self.typed(Method::GET, &format!("/pending?{query}"), None)
            .await
    }

    /// `GET /resource_providers?name=...`: the uuid of the provider with that name
    /// (names are unique), or `None` when there is none.
    pub async fn provider_named(&self, name: &str) -> Result<Option<Uuid>> {
        let path = format!("/resource_providers?name={}", path_segment(name));
        let list: ProviderList = self.typed(Method::GET, &path, None).await?;
        Ok(list.resource_providers.first().map(|p| p.uuid))
    }
}

/// `name=value&...` for the pairs that have a value, values percent-encoded.
pub(crate) fn query_string(pairs: &[(&str, Option<String>)]) -> String {
    pairs
        .iter()
        .filter_map(|(name, value)| {
            value
                .as_ref()
                .map(|v| format!("{name}={}", path_segment(v)))
        })
        .collect::<Vec<_>>()
        .join("&")
}

pub(crate) fn parse<T: serde::de::DeserializeOwned>(
    method: Method,
    path: &str,
    body: &[u8],
) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| Error::Decode {
        method,
        path: path.to_owned(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::stub;
    use crate::Config;
    use serde_json::json;

    fn claim_json(uuid: u128) -> Value {
        json!({
            "uuid": Uuid::from_u128(uuid), "consumer_uuid": Uuid::from_u128(100),
            "consumer_type": null, "project_id": "p", "user_id": "u",
            "allocations": {Uuid::from_u128(7).to_string(): {"resources": {"VCPU": 2}}},
            "tag": null, "state": "pending", "created_at": "2024-01-02T03:04:05Z",
            "expires_at": null, "ended_at": null
        })
    }

    fn client(url: &str) -> Client {
        Client::new(&Config::new(url)).unwrap()
    }

    /// A claim with every optional field left to the server, and nothing in it.
    fn bare_claim() -> NewClaim {
        NewClaim {
            consumer_uuid: Uuid::nil(),
            consumer_type: None,
            project_id: "p".into(),
            user_id: "u".into(),
            allocations: BTreeMap::new(),
            expires_in: ClaimExpiry::ServerDefault,
            tag: None,
            server_group: None,
        }
    }

    #[tokio::test]
    async fn create_sends_the_contract_body_and_reads_the_claim() {
        let mut answer = claim_json(1);
        answer["server_note"] = json!("kept");
        let (url, server) = stub(vec![("201 Created", answer.to_string())]).await;
        let new = NewClaim {
            consumer_uuid: Uuid::from_u128(100),
            consumer_type: Some("INSTANCE".into()),
            project_id: "p".into(),
            user_id: "u".into(),
            allocations: BTreeMap::from([(
                Uuid::from_u128(7),
                ClaimResources {
                    resources: BTreeMap::from([("VCPU".into(), 2)]),
                },
            )]),
            expires_in: ClaimExpiry::Never,
            tag: None,
            server_group: None,
        };
        let claim = client(&url).create_claim(&new).await.unwrap();
        assert_eq!(claim.uuid, Uuid::from_u128(1));
        assert_eq!(claim.state, ClaimState::Pending);
        assert_eq!(claim.allocations[&Uuid::from_u128(7)].resources["VCPU"], 2);
        // A field the client does not know survives a round trip.
        assert_eq!(serde_json::to_value(&claim).unwrap(), answer);
        let request = &server.await.unwrap()[0];
        assert!(request.starts_with("POST /claims HTTP/1.1"), "{request}");
        let body: Value = serde_json::from_str(request.split_once("\r\n\r\n").unwrap().1).unwrap();
        assert_eq!(
            body,
            json!({"consumer_uuid": Uuid::from_u128(100), "consumer_type": "INSTANCE",
                   "project_id": "p", "user_id": "u",
                   "allocations": {Uuid::from_u128(7).to_string(): {"resources": {"VCPU": 2}}},
                   "expires_in": null})
        );
    }

    #[test]
    fn expiry_is_left_out_null_or_seconds() {
        let mut new = NewClaim {
            tag: Some("t".into()),
            ..bare_claim()
        };
        let body = serde_json::to_value(&new).unwrap();
        assert!(body.get("expires_in").is_none(), "{body}");
        assert!(body.get("consumer_type").is_none(), "{body}");
        assert_eq!(body["tag"], "t");
        new.expires_in = ClaimExpiry::After(90);
        assert_eq!(serde_json::to_value(&new).unwrap()["expires_in"], 90);
    }

    #[test]
    fn the_filter_encodes_what_it_has() {
        assert_eq!(ClaimFilter::default().query(), "");
        let filter = ClaimFilter {
            project_id: Some("my project".into()),
            tag: Some("a&b=c".into()),
            state: Some(ClaimState::Expired),
            limit: Some(5),
            ..ClaimFilter::default()
        };
        assert_eq!(
            filter.query(),
            "project_id=my%20project&tag=a%26b%3Dc&state=expired&limit=5"
        );
        assert_eq!("released".parse(), Ok(ClaimState::Released));
        assert!("gone".parse::<ClaimState>().is_err());
    }

    #[tokio::test]
    async fn all_claims_follows_the_marker_until_a_short_page() {
        let page = |uuids: &[u128]| {
            json!({"claims": uuids.iter().map(|u| claim_json(*u)).collect::<Vec<_>>()}).to_string()
        };
        let (url, server) = stub(vec![
            ("200 OK", page(&[1, 2])),
            ("200 OK", page(&[3, 4])),
            ("200 OK", page(&[5])),
        ])
        .await;
        let filter = ClaimFilter {
            consumer_uuid: Some(Uuid::from_u128(100)),
            limit: Some(2),
            ..ClaimFilter::default()
        };
        let all = client(&url).all_claims(&filter).await.unwrap();
        let uuids: Vec<u128> = all.iter().map(|c| c.uuid.as_u128()).collect();
        assert_eq!(uuids, [1, 2, 3, 4, 5]);
        let requests = server.await.unwrap();
        let consumer = Uuid::from_u128(100);
        assert!(
            requests[0].starts_with(&format!("GET /claims?consumer_uuid={consumer}&limit=2 ")),
            "{}",
            requests[0]
        );
        assert!(
            requests[2].starts_with(&format!(
                "GET /claims?consumer_uuid={consumer}&limit=2&marker={} ",
                Uuid::from_u128(4)
            )),
            "{}",
            requests[2]
        );
    }

    #[tokio::test]
    async fn confirm_and_releases_use_the_contract_urls() {
        let mut confirmed = claim_json(1);
        confirmed["state"] = json!("confirmed");
        confirmed["ended_at"] = json!("2024-01-02T03:05:00Z");
        let (url, server) = stub(vec![
            ("200 OK", confirmed.to_string()),
            ("204 No Content", String::new()),
            ("204 No Content", String::new()),
        ])
        .await;
        let client = client(&url);
        let uuid = Uuid::from_u128(1);
        let claim = client.confirm_claim(uuid, true).await.unwrap();
        assert_eq!(claim.state, ClaimState::Confirmed);
        assert_eq!(claim.ended_at.as_deref(), Some("2024-01-02T03:05:00Z"));
        client.release_claim(uuid).await.unwrap();
        client
            .release_consumer_claims(Uuid::from_u128(100))
            .await
            .unwrap();
        let requests = server.await.unwrap();
        assert!(
            requests[0].starts_with(&format!("POST /claims/{uuid}/confirm ")),
            "{}",
            requests[0]
        );
        assert!(
            requests[0].ends_with(r#"{"replace":true}"#),
            "{}",
            requests[0]
        );
        assert!(requests[1].starts_with(&format!("DELETE /claims/{uuid} ")));
        assert!(requests[2].starts_with(&format!(
            "DELETE /claims?consumer_uuid={} ",
            Uuid::from_u128(100)
        )));
    }

    #[tokio::test]
    async fn a_refused_claim_carries_the_servers_code_and_detail() {
        let envelope = json!({"errors": [{"status": 409, "title": "Conflict",
            "code": "allot.claim.does_not_fit",
            "detail": "Claim does not fit: VCPU on provider cn1"}]});
        let (url, _server) = stub(vec![("409 Conflict", envelope.to_string())]).await;
        let error = client(&url).create_claim(&bare_claim()).await.unwrap_err();
        assert_eq!(error.status(), Some(StatusCode::CONFLICT));
        let text = error.to_string();
        assert!(text.contains("allot.claim.does_not_fit"), "{text}");
        assert!(text.contains("VCPU on provider cn1"), "{text}");
    }

    #[tokio::test]
    async fn pending_totals_and_name_lookup() {
        let rp = Uuid::from_u128(7);
        let consumer = Uuid::from_u128(100);
        let (url, server) = stub(vec![
            (
                "200 OK",
                json!({"pending": {"VCPU": 3},
                       "consumers": {consumer.to_string(): {"VCPU": 3}}})
                .to_string(),
            ),
            ("200 OK", json!({"pending": {"MEMORY_MB": 512}}).to_string()),
            (
                "200 OK",
                json!({"resource_providers": [{"uuid": rp, "name": "cn 1"}]}).to_string(),
            ),
            ("200 OK", json!({"resource_providers": []}).to_string()),
        ])
        .await;
        let client = client(&url);
        let pending = client.provider_pending(rp, true, false).await.unwrap();
        assert_eq!(pending.pending["VCPU"], 3);
        assert_eq!(pending.consumers.unwrap()[&consumer]["VCPU"], 3);
        let totals = client
            .pending_totals(None, Some("p 1"), None)
            .await
            .unwrap();
        assert_eq!(totals["MEMORY_MB"], 512);
        assert_eq!(client.provider_named("cn 1").await.unwrap(), Some(rp));
        assert_eq!(client.provider_named("nope").await.unwrap(), None);
        let requests = server.await.unwrap();
        assert!(requests[0].starts_with(&format!(
            "GET /resource_providers/{rp}/pending?detail=consumers "
        )));
        assert!(requests[1].starts_with("GET /pending?project_id=p%201 "));
        assert!(requests[2].starts_with("GET /resource_providers?name=cn%201 "));
    }
}
