//! The requests of the claims API (an allot extension): the bodies of `POST /claims`
//! and `POST /claims/{uuid}/confirm`, and the query strings of `GET /claims`,
//! `DELETE /claims`, `GET /resource_providers/{uuid}/pending` and `GET /pending`.

use allot_core::names::canonical_uuid;
use allot_core::ops::claims::{ClaimFilter, NewClaim};
use allot_core::ops::pick::Affinity;
use allot_core::{ClaimState, Error, ResourceClass, Timestamp, Uuid};
use serde::Deserialize;

use super::allocations::{consumer_uuid, requested};
use super::{present, Entries, JsonBody, QueryParams};
use crate::error::ApiError;
use crate::params::invalid_query;
use crate::schemas;

/// When a new claim expires, as its request says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// `expires_in` left out: the server's default.
    ServerDefault,
    /// `expires_in: null`: never.
    Never,
    /// `expires_in: N`: N seconds after its creation.
    After(i64),
}

impl Expiry {
    /// When a claim created at `now` expires (None: never), `default` being the
    /// server's expiry in seconds (`Settings::claim_expires_in`) for a request that
    /// names none. An expiry past any representable time is refused, as a request
    /// the rule cannot take.
    pub fn at(self, default: Option<i64>, now: Timestamp) -> allot_core::Result<Option<Timestamp>> {
        let seconds = match self {
            Expiry::ServerDefault => default,
            Expiry::Never => None,
            Expiry::After(seconds) => Some(seconds),
        };
        seconds
            .map(|seconds| {
                now.checked_add(seconds).ok_or_else(|| {
                    Error::invalid("expires_in puts the expiry beyond any representable time.")
                })
            })
            .transpose()
    }
}

/// The body of `POST /claims`: the claim, and when it expires.
#[derive(Debug)]
pub struct ClaimRequest {
    /// The claim, its amounts by provider as spelled and then by class, in request
    /// order (the rule reports the first problem); its expiry is still to be counted
    /// from the moment it is planned. For a pick, the pattern of every instance's
    /// claim, without amounts.
    pub claim: NewClaim,
    /// When it expires.
    pub expiry: Expiry,
    /// With `request` instead of `allocations`: the server chooses (issue 24).
    pub pick: Option<PickRequest>,
}

/// The pick-and-claim part of a `POST /claims` body.
#[derive(Debug)]
pub struct PickRequest {
    /// The query string of `GET /allocation_candidates`, with the body's `sort` and
    /// `prefer` after it.
    pub query: String,
    /// With `consumers`: each instance's consumer, tag and server group (the single
    /// claim's otherwise).
    pub instances: Option<Vec<InstanceRequest>>,
    /// With `consumers`: each instance's own query string, for those that give one
    /// (a mass start of mixed shapes), with the body's `sort` and `prefer`.
    pub shapes: Vec<Option<String>>,
    /// The instances' affinity rule.
    pub affinity: Affinity,
    /// Whether some instances may stay unplaced.
    pub partial: bool,
}

/// One instance of a mass start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceRequest {
    /// Its consumer.
    pub consumer: Uuid,
    /// Its claim's tag (the request's unless it gives its own).
    pub tag: Option<String>,
    /// The server group it joins (the request's unless it names its own).
    pub server_group: Option<Uuid>,
}

/// The tree of [`ClaimRequest`] as its schema checked it.
#[derive(Debug, Deserialize)]
struct CreateBody {
    #[serde(default)]
    consumer_uuid: Option<String>,
    #[serde(default)]
    consumer_type: Option<String>,
    project_id: String,
    user_id: String,
    #[serde(default)]
    allocations: Option<Entries<ClaimProvider>>,
    #[serde(default, deserialize_with = "present")]
    expires_in: Option<Option<i64>>,
    #[serde(default)]
    tag: Option<String>,
    #[serde(default)]
    request: Option<String>,
    #[serde(default)]
    sort: Option<String>,
    #[serde(default)]
    prefer: Option<String>,
    #[serde(default)]
    consumers: Option<Vec<Instance>>,
    #[serde(default)]
    affinity: Option<String>,
    #[serde(default)]
    partial: Option<bool>,
    #[serde(default)]
    server_group: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Instance {
    consumer_uuid: String,
    #[serde(default)]
    tag: Option<String>,
    #[serde(default)]
    server_group: Option<String>,
    #[serde(default)]
    request: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ClaimProvider {
    resources: Entries<u64>,
}

impl ClaimRequest {
    /// Reads and checks the body, for a claim to be named `uuid`.
    pub fn read(body: &JsonBody, uuid: Uuid) -> Result<Self, ApiError> {
        Self::convert(body.read(&schemas::claim_create())?, uuid)
    }

    fn convert(body: CreateBody, uuid: Uuid) -> Result<Self, ApiError> {
        let pick = Self::pick(&body)?;
        let allocations = match body.allocations {
            Some(given) => requested(
                given
                    .0
                    .into_iter()
                    .map(|(provider, amounts)| (provider, amounts.resources))
                    .collect(),
            ),
            None => Vec::new(),
        };
        let consumer = match &body.consumer_uuid {
            Some(raw) => consumer_uuid(raw)?,
            // A mass start names its consumers per instance.
            None => Uuid::nil(),
        };
        let claim = NewClaim {
            uuid,
            consumer,
            project_id: body.project_id,
            user_id: body.user_id,
            consumer_type: body.consumer_type,
            tag: body.tag,
            allocations,
            expires_at: None,
            server_group: body.server_group.as_deref().map(group_uuid).transpose()?,
        };
        Ok(ClaimRequest {
            claim,
            expiry: match body.expires_in {
                None => Expiry::ServerDefault,
                Some(None) => Expiry::Never,
                Some(Some(seconds)) => Expiry::After(seconds),
            },
            pick,
        })
    }

    /// Which of the two forms the body has: `allocations` (the caller chose) or
    /// `request` (the server chooses), with what each allows.
    fn pick(body: &CreateBody) -> Result<Option<PickRequest>, ApiError> {
        let picking_keys = [
            ("sort", body.sort.is_some()),
            ("prefer", body.prefer.is_some()),
            ("consumers", body.consumers.is_some()),
            ("affinity", body.affinity.is_some()),
            ("partial", body.partial.is_some()),
        ];
        // A mass start whose every instance names its own shape needs no
        // `request` of its own: the first instance's stands for it.
        let every_own = body.consumers.as_ref().and_then(|list| {
            list.iter()
                .map(|i| i.request.as_ref())
                .collect::<Option<Vec<_>>>()
                .map(|own| own[0].clone())
        });
        let Some(request) = body.request.as_ref().or(every_own.as_ref()) else {
            if body.allocations.is_none() {
                return Err(ApiError::bad_request(
                    "A claim needs 'allocations' (where) or 'request' (what, for the server \
                     to choose where).",
                ));
            }
            if let Some((key, _)) = picking_keys.iter().find(|(_, given)| *given) {
                return Err(ApiError::bad_request(format!(
                    "'{key}' goes with 'request', not with 'allocations'."
                )));
            }
            if body.consumer_uuid.is_none() {
                return Err(super::not_valid("'consumer_uuid' is a required property"));
            }
            return Ok(None);
        };
        if body.allocations.is_some() {
            return Err(ApiError::bad_request(
                "Give 'allocations' or 'request', not both.",
            ));
        }
        let instances = match (&body.consumer_uuid, &body.consumers) {
            (Some(_), None) => None,
            (None, Some(list)) => {
                let mut seen = std::collections::HashSet::new();
                let mut instances = Vec::with_capacity(list.len());
                for instance in list {
                    let consumer = consumer_uuid(&instance.consumer_uuid)?;
                    if !seen.insert(consumer) {
                        return Err(ApiError::bad_request(format!(
                            "Consumer {consumer} is named twice in 'consumers'."
                        )));
                    }
                    let server_group = match &instance.server_group {
                        Some(raw) => Some(group_uuid(raw)?),
                        None => body.server_group.as_deref().map(group_uuid).transpose()?,
                    };
                    instances.push(InstanceRequest {
                        consumer,
                        tag: instance.tag.clone().or(body.tag.clone()),
                        server_group,
                    });
                }
                Some(instances)
            }
            _ => {
                return Err(ApiError::bad_request(
                    "A pick names its consumer with 'consumer_uuid', or its instances with \
                     'consumers', not both and not neither.",
                ))
            }
        };
        if instances.is_none() && (body.affinity.is_some() || body.partial.is_some()) {
            return Err(ApiError::bad_request(
                "'affinity' and 'partial' go with 'consumers'.",
            ));
        }
        // `sort` and `prefer` weigh every instance, whatever its shape.
        let with_weighers =
            |request: &str| with_weighers(request, body.sort.as_deref(), body.prefer.as_deref());
        let shapes = body
            .consumers
            .iter()
            .flatten()
            .map(|i| i.request.as_deref().map(with_weighers))
            .collect();
        Ok(Some(PickRequest {
            query: with_weighers(request),
            shapes,
            instances,
            affinity: match body.affinity.as_deref() {
                None | Some("none") => Affinity::None,
                Some("different_roots") => Affinity::DifferentRoots,
                Some(_) => Affinity::SameRoot,
            },
            partial: body.partial.unwrap_or(false),
        }))
    }
}

/// A query string with a body's `sort` and `prefer` after it (the last of each
/// wins), as a pick or a drain weighs every query it is given.
pub(crate) fn with_weighers(request: &str, sort: Option<&str>, prefer: Option<&str>) -> String {
    let mut query = request.trim_start_matches('?').to_owned();
    for (key, value) in [("sort", sort), ("prefer", prefer)] {
        if let Some(value) = value {
            let value: String = form_urlencoded::byte_serialize(value.as_bytes()).collect();
            query = format!("{query}&{key}={value}");
        }
    }
    query
}

/// A server group named in a body: any spelling of a uuid the schema accepts.
fn group_uuid(raw: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(raw)
        .map_err(|_| ApiError::bad_request(format!("Invalid server group uuid {raw:?}.")))
}

/// The body of `POST /claims/{uuid}/confirm`, optional: whether the claim replaces
/// what the consumer holds (else it is added).
pub fn read_confirm(body: &JsonBody) -> Result<bool, ApiError> {
    #[derive(Deserialize)]
    struct Confirm {
        #[serde(default)]
        replace: bool,
    }
    if body.is_empty() {
        return Ok(false);
    }
    let confirm: Confirm = body.read(&schemas::claim_confirm())?;
    Ok(confirm.replace)
}

/// A claim named in a path: a uuid that is not spelled canonically names no claim,
/// as a provider's does not (404).
pub fn claim_in_path(raw: &str) -> Result<Uuid, ApiError> {
    canonical_uuid(raw)
        .ok_or_else(|| ApiError::not_found(format!("No claim with uuid {raw} found.")))
}

/// The query string of `GET /claims`: the filters, and the page.
#[derive(Debug)]
pub struct ClaimsQuery {
    /// What a claim must be to be listed.
    pub filter: ClaimFilter,
    /// The last claim of the page before, as read and as given.
    pub marker: Option<(Uuid, String)>,
    /// The most claims to list.
    pub limit: Option<usize>,
}

impl ClaimsQuery {
    /// Reads and checks the query string.
    pub fn read(raw: Option<&str>) -> Result<Self, ApiError> {
        let q = QueryParams::checked(raw, &schemas::claims_query())?;
        let filter = ClaimFilter {
            consumer: q.uuid("consumer_uuid")?,
            provider: q.uuid("resource_provider_uuid")?,
            project_id: q.owned("project_id"),
            consumer_type: q.owned("consumer_type"),
            tag: q.owned("tag"),
            // The schema's enum admits only the states' names.
            state: q.text("state").and_then(ClaimState::parse),
            // The schema's pattern admits only a class's spelling; a class that
            // does not exist is promised by no claim, so it lists none.
            resource_class: q.text("resource_class").map(ResourceClass::new_unchecked),
        };
        let marker = q.uuid("marker")?.zip(q.owned("marker"));
        // The schema's pattern admits only positive integers; one past usize asks for
        // more than any list holds, which is no limit.
        let limit = q
            .text("limit")
            .map(|l| l.parse::<usize>().unwrap_or(usize::MAX));
        Ok(ClaimsQuery {
            filter,
            marker,
            limit,
        })
    }

    /// The refusal of a `marker` that names no claim, which only the view can tell
    /// (400, a query string problem, with the marker as given).
    pub fn unknown_marker(marker: Option<(Uuid, String)>) -> ApiError {
        let given = marker.map(|(_, given)| given).unwrap_or_default();
        invalid_query(format!("marker '{given}' is not a claim"))
    }
}

/// The query string of `DELETE /claims`: the consumer whose live claims go.
pub fn read_release_query(raw: Option<&str>) -> Result<Uuid, ApiError> {
    let q = QueryParams::checked(raw, &schemas::claims_release_query())?;
    q.uuid("consumer_uuid")?
        .ok_or_else(|| invalid_query("'consumer_uuid' is a required property"))
}

/// The query string of `GET /resource_providers/{uuid}/pending`: whether the answer
/// details each consumer's part, and whether it sums the providers below too.
pub fn read_provider_pending_query(raw: Option<&str>) -> Result<(bool, bool), ApiError> {
    let q = QueryParams::checked(raw, &schemas::provider_pending_query())?;
    Ok((
        q.text("detail") == Some("consumers"),
        q.text("tree") == Some("true"),
    ))
}

/// The query string of `GET /pending`: a consumer, a project, or both, and a class
/// to answer alone; or, with `group_by=root`, every root's totals (of a consumer or
/// project when given).
#[derive(Debug)]
pub struct PendingQuery {
    /// The consumer.
    pub consumer: Option<Uuid>,
    /// The project.
    pub project_id: Option<String>,
    /// The one class to answer (every class when `None`).
    pub resource_class: Option<ResourceClass>,
    /// `group_by=root`: the totals of every root.
    pub by_root: bool,
}

impl PendingQuery {
    /// Reads and checks the query string.
    pub fn read(raw: Option<&str>) -> Result<Self, ApiError> {
        let q = QueryParams::checked(raw, &schemas::pending_query())?;
        let query = PendingQuery {
            consumer: q.uuid("consumer_uuid")?,
            project_id: q.owned("project_id"),
            resource_class: q.text("resource_class").map(ResourceClass::new_unchecked),
            // The schema's enum admits only `root`.
            by_root: q.text("group_by").is_some(),
        };
        if query.consumer.is_none() && query.project_id.is_none() && !query.by_root {
            return Err(invalid_query(
                "one of 'consumer_uuid' and 'project_id' is required (or group_by=root)",
            ));
        }
        Ok(query)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use allot_client::{ClaimExpiry, ClaimResources};
    use std::collections::BTreeMap;

    /// The expiry counts from the moment given, the server's default where the
    /// request names none, and one past any representable time is refused.
    #[test]
    fn expiry_counts_from_now() {
        assert_eq!(Expiry::ServerDefault.at(Some(60), 1_000), Ok(Some(1_060)));
        assert_eq!(Expiry::ServerDefault.at(None, 1_000), Ok(None));
        assert_eq!(Expiry::Never.at(Some(60), 1_000), Ok(None));
        assert_eq!(Expiry::After(5).at(Some(60), 1_000), Ok(Some(1_005)));
        let e = Expiry::After(i64::MAX).at(None, 1).unwrap_err();
        assert!(e
            .to_string()
            .contains("expires_in puts the expiry beyond any representable time."));
    }

    /// The request stays the server's own type (it keeps the request's order and
    /// spellings, which decide the answer), so what the client sends is checked
    /// here instead: every body `allot-client` writes passes the schema and reads
    /// as the client meant it, `expires_in` left out, `null` or seconds included.
    #[test]
    fn the_clients_new_claim_is_a_valid_body() {
        let provider = Uuid::from_u128(7);
        for (expiry, expected) in [
            (ClaimExpiry::ServerDefault, Expiry::ServerDefault),
            (ClaimExpiry::Never, Expiry::Never),
            (ClaimExpiry::After(90), Expiry::After(90)),
        ] {
            let new = allot_client::NewClaim {
                consumer_uuid: Uuid::from_u128(100),
                consumer_type: Some("INSTANCE".into()),
                project_id: "p".into(),
                user_id: "u".into(),
                allocations: BTreeMap::from([(
                    provider,
                    ClaimResources {
                        resources: BTreeMap::from([("VCPU".into(), 2)]),
                    },
                )]),
                expires_in: expiry,
                tag: Some("t".into()),
                server_group: Some(Uuid::from_u128(44)),
            };
            let body = serde_json::to_value(&new).unwrap();
            crate::schema::validate(&body, &schemas::claim_create()).unwrap();
            let read =
                ClaimRequest::convert(serde_json::from_value(body).unwrap(), Uuid::from_u128(9))
                    .unwrap();
            assert_eq!(read.expiry, expected, "{expiry:?}");
            let read = read.claim;
            assert_eq!(read.uuid, Uuid::from_u128(9));
            assert_eq!(read.consumer, new.consumer_uuid);
            assert_eq!(read.consumer_type.as_deref(), Some("INSTANCE"));
            assert_eq!(read.tag.as_deref(), Some("t"));
            assert_eq!(read.server_group, new.server_group);
            let amount = &read.allocations[0];
            assert_eq!(amount.provider.uuid(), Some(provider));
            assert_eq!((amount.class.as_str(), amount.used), ("VCPU", 2));
        }
    }
}
