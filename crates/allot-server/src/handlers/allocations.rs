//! Allocations: `GET/PUT/DELETE /allocations/{consumer_uuid}`, `POST /allocations`
//! (1.13) and `GET /resource_providers/{uuid}/allocations`.
//!
//! The rules live in `allot_core::ops::allocations` (one rule for every write); here
//! are the HTTP concerns: Placement's order of checks, the body forms of each
//! microversion (the 1.0 list, the 1.12 dict, `project_id`/`user_id` from 1.8,
//! `consumer_generation` from 1.28, `mappings` from 1.34, `consumer_type` from 1.38),
//! and each endpoint's wording of the rule's refusals.
//!
//! Placement walks request objects in the order the client wrote them, which decides
//! which of several problems a request is refused for; so bodies are read a second
//! time into [`Ordered`], which keeps that order (the schema sees a plain `Value`).

use std::collections::HashMap;

use allot_core::ops::allocations::{
    ConsumerGeneration, ConsumerWrite, Refusal, Requested, INCOMPLETE_CONSUMER_ID,
    UNKNOWN_CONSUMER_TYPE,
};
use allot_core::ops::providers::canonical_uuid;
use allot_core::{ConflictCode, Error, ResourceClass, Timestamp, Uuid};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::context::Ctx;
use crate::error::{ApiError, ApiResult};
use crate::params::{no_provider, uuid_like, ProviderPath};
use crate::policy::{authorize, Action};
use crate::{http, schema, schemas, AppState};

const LIST: Action = Action::AllocationsList;
const MANAGE: Action = Action::AllocationsManage;
const UPDATE: Action = Action::AllocationsUpdate;
const DELETE: Action = Action::AllocationsDelete;
const PROVIDER_LIST: Action = Action::ProviderAllocationsList;

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/allocations", post(create_many))
        .route(
            "/allocations/{consumer_uuid}",
            get(list_for_consumer).put(replace).delete(delete),
        )
        .route(
            "/resource_providers/{uuid}/allocations",
            get(list_for_provider),
        )
}

// ----- reading bodies -----

/// A JSON value whose objects keep their keys in the order of the text (a repeated
/// key keeps its first place and its last value, as a Python dict does).
#[derive(Debug, Clone, PartialEq)]
enum Ordered {
    Object(Vec<(String, Ordered)>),
    Array(Vec<Ordered>),
    Scalar(Value),
}

impl Ordered {
    fn get(&self, key: &str) -> Option<&Ordered> {
        match self {
            Ordered::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn entries(&self) -> &[(String, Ordered)] {
        match self {
            Ordered::Object(entries) => entries,
            _ => &[],
        }
    }

    fn items(&self) -> &[Ordered] {
        match self {
            Ordered::Array(items) => items,
            _ => &[],
        }
    }

    fn scalar(&self) -> Option<&Value> {
        match self {
            Ordered::Scalar(v) => Some(v),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        self.scalar().and_then(Value::as_str)
    }
}

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::Bool(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::from(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::from(v)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::from(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::String(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::String(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::Null))
            }
            fn visit_none<E: de::Error>(self) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::Null))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Ordered, D::Error> {
                Ordered::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Ordered, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Ordered::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
                let mut entries: Vec<(String, Ordered)> = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Ordered>()? {
                    match entries.iter_mut().find(|(k, _)| *k == key) {
                        Some(slot) => slot.1 = value,
                        None => entries.push((key, value)),
                    }
                }
                Ok(Ordered::Object(entries))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// Reads a body as Placement's `extract_json` does: JSON (400 "Malformed JSON"), then
/// the schema (400 "JSON does not validate"); returns it with its key order kept.
fn read_body(headers: &HeaderMap, body: &Bytes, schema: &Value) -> Result<Ordered, ApiError> {
    let value = http::json_value(headers, body)?;
    schema::validate(&value, schema)
        .map_err(|e| ApiError::bad_request(format!("JSON does not validate: {e}")))?;
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("Malformed JSON: {e}")))
}

/// One consumer's part of a write, as the request gave it.
struct Claim {
    write: ConsumerWrite,
    /// The provider uuids in request order, as written (only the canonical spelling
    /// names a provider).
    providers: Vec<String>,
    /// The generation as Placement's conflict message repeats it.
    given_generation: String,
}

/// The amounts of one provider, in request order. The schema made every value a
/// positive integer.
fn amounts(provider: Option<Uuid>, resources: &Ordered, out: &mut Vec<Requested>) {
    let Some(provider) = provider else { return };
    for (class, used) in resources.entries() {
        out.push(Requested {
            provider,
            class: ResourceClass::new_unchecked(class.as_str()),
            used: used.scalar().and_then(Value::as_u64).unwrap_or(0),
        });
    }
}

/// Turns one consumer's validated body into a [`Claim`], at microversion `1.minor`.
fn claim(consumer: Uuid, body: &Ordered, minor: u16) -> Claim {
    let mut providers: Vec<String> = Vec::new();
    let mut allocations = Vec::new();
    let allocs = body.get("allocations");
    if minor < 12 {
        // The list form; Placement turns it into a dict by provider uuid, so a
        // provider listed twice keeps its first place and its last amounts.
        let mut by_provider: Vec<(String, &Ordered)> = Vec::new();
        for item in allocs.map(Ordered::items).unwrap_or(&[]) {
            let uuid = item
                .get("resource_provider")
                .and_then(|rp| rp.get("uuid"))
                .and_then(Ordered::as_str)
                .unwrap_or("")
                .to_owned();
            let Some(resources) = item.get("resources") else {
                continue;
            };
            match by_provider.iter_mut().find(|(u, _)| *u == uuid) {
                Some(slot) => slot.1 = resources,
                None => by_provider.push((uuid, resources)),
            }
        }
        for (uuid, resources) in by_provider {
            amounts(canonical_uuid(&uuid), resources, &mut allocations);
            providers.push(uuid);
        }
    } else {
        for (uuid, entry) in allocs.map(Ordered::entries).unwrap_or(&[]) {
            if let Some(resources) = entry.get("resources") {
                amounts(canonical_uuid(uuid), resources, &mut allocations);
            }
            providers.push(uuid.clone());
        }
    }

    let owner = |key: &str| {
        body.get(key)
            .and_then(Ordered::as_str)
            .unwrap_or(INCOMPLETE_CONSUMER_ID)
            .to_owned()
    };
    // Before 1.8 neither is allowed, and Placement uses its "incomplete consumer"
    // project and user.
    let (project_id, user_id) = if minor >= 8 {
        (owner("project_id"), owner("user_id"))
    } else {
        (
            INCOMPLETE_CONSUMER_ID.to_owned(),
            INCOMPLETE_CONSUMER_ID.to_owned(),
        )
    };

    let given = body.get("consumer_generation").and_then(Ordered::scalar);
    let (generation, given_generation) = if minor < 28 {
        (ConsumerGeneration::Unchecked, "None".to_owned())
    } else {
        match given {
            Some(Value::Number(n)) => match n.as_u64() {
                Some(g) => (ConsumerGeneration::Is(g), n.to_string()),
                // No consumer has a negative generation: never a match.
                None => (ConsumerGeneration::Is(u64::MAX), n.to_string()),
            },
            _ => (ConsumerGeneration::New, "None".to_owned()),
        }
    };

    let consumer_type = if minor >= 38 {
        body.get("consumer_type")
            .and_then(Ordered::as_str)
            .map(str::to_owned)
    } else {
        None
    };

    Claim {
        write: ConsumerWrite {
            consumer,
            project_id,
            user_id,
            consumer_type,
            generation,
            allocations,
        },
        providers,
        given_generation,
    }
}

/// Which endpoint a write comes from: they word an unknown class differently.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Put,
    Post,
}

/// Plans a write of `claims` with Placement's order of checks and the endpoint's
/// wording of refusals.
fn plan(
    view: &allot_core::State,
    claims: &[Claim],
    endpoint: Endpoint,
    now: Timestamp,
) -> allot_core::Result<Vec<allot_core::Change>> {
    let writes: Vec<ConsumerWrite> = claims.iter().map(|c| c.write.clone()).collect();
    let given: HashMap<Uuid, &str> = claims
        .iter()
        .map(|c| (c.write.consumer, c.given_generation.as_str()))
        .collect();
    let word = |refusal: Refusal| -> Error {
        match refusal {
            Refusal::ConsumerGeneration {
                consumer, actual, ..
            } => Error::conflict(
                ConflictCode::ConcurrentUpdate,
                format!(
                    "consumer generation conflict - expected {} but got {}",
                    actual.map_or("null".to_owned(), |g| g.to_string()),
                    given.get(&consumer).copied().unwrap_or("None")
                ),
            ),
            Refusal::UnknownClass { class, .. } if endpoint == Endpoint::Post => Error::invalid(
                format!("Unable to allocate inventory No such resource class {class}."),
            ),
            other => other.into_error(),
        }
    };
    view.check_consumer_generations(&writes).map_err(word)?;
    // Providers are looked up by the text the request gives, before anything else
    // about the allocations.
    for raw in claims.iter().flat_map(|c| &c.providers) {
        if view.provider_by_uuid_str(raw).is_none() {
            return Err(Error::invalid(format!(
                "Allocation for resource provider '{raw}' that does not exist."
            )));
        }
    }
    view.plan_allocations(&writes, now).map_err(word)
}

// ----- handlers -----

/// `PUT /allocations/{consumer_uuid}`: replace everything a consumer holds.
pub async fn replace(
    ctx: Ctx,
    State(app): State<AppState>,
    Path(raw): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    http::require_json_content(&headers, &body)?;
    authorize(&ctx, app.config.policy, UPDATE)?;
    let consumer = uuid_like(&raw)
        .ok_or_else(|| ApiError::bad_request(format!("Malformed consumer_uuid: {raw}")))?;
    let minor = ctx.version.0;
    let body = read_body(&headers, &body, &schemas::allocations_put(minor))?;
    let claims = vec![claim(consumer, &body, minor)];
    app.write(move |view, now| Ok(((), plan(view, &claims, Endpoint::Put, now)?)))
        .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

/// `POST /allocations` (1.13): replace the allocations of several consumers at once,
/// all or nothing; a consumer given no allocations loses all it holds.
pub async fn create_many(
    ctx: Ctx,
    State(app): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult {
    ctx.require(13)?;
    http::require_json_content(&headers, &body)?;
    authorize(&ctx, app.config.policy, MANAGE)?;
    let minor = ctx.version.0;
    let body = read_body(&headers, &body, &schemas::allocations_post(minor))?;
    let mut claims: Vec<Claim> = Vec::new();
    for (key, consumer_body) in body.entries() {
        // The schema let through 36 hex digits and dashes; Placement would keep a
        // key it cannot read as a uuid as an opaque consumer id, which we cannot.
        let consumer = uuid_like(key)
            .ok_or_else(|| ApiError::bad_request(format!("Malformed consumer_uuid: {key}")))?;
        let claim = claim(consumer, consumer_body, minor);
        // Two spellings of one uuid name one consumer here: the last one wins.
        claims.retain(|c| c.write.consumer != consumer);
        claims.push(claim);
    }
    app.write(move |view, now| Ok(((), plan(view, &claims, Endpoint::Post, now)?)))
        .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

/// `DELETE /allocations/{consumer_uuid}`.
pub async fn delete(ctx: Ctx, State(app): State<AppState>, Path(raw): Path<String>) -> ApiResult {
    authorize(&ctx, app.config.policy, DELETE)?;
    // Placement looks the consumer up by the text of the path.
    let consumer = canonical_uuid(&raw)
        .ok_or_else(|| ApiError::not_found(format!("No allocations for consumer '{raw}'")))?;
    app.write(move |view, _| view.delete_allocations(&consumer))
        .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

/// `GET /allocations/{consumer_uuid}`: what a consumer holds, by provider. An unknown
/// consumer holds nothing (Placement cannot tell it from one that never allocated).
pub async fn list_for_consumer(
    ctx: Ctx,
    State(app): State<AppState>,
    Path(raw): Path<String>,
) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.policy, LIST)?;
    let minor = ctx.version.0;
    let (body, last_modified) = {
        let view = app.host.read();
        let consumer = canonical_uuid(&raw).and_then(|u| view.consumer(&u));
        let held = consumer
            .map(|c| view.consumer_allocations(&c.row.uuid))
            .unwrap_or_default();
        let by_provider: Map<String, Value> = held
            .iter()
            .map(|h| {
                let resources: Map<String, Value> = h
                    .resources
                    .iter()
                    .map(|(class, used)| (class.to_string(), json!(used)))
                    .collect();
                (
                    h.provider.uuid().to_string(),
                    json!({"generation": h.provider.row.generation, "resources": resources}),
                )
            })
            .collect();
        let mut body = json!({ "allocations": by_provider });
        let mut last_modified = None;
        if let (Some(c), false) = (consumer, held.is_empty()) {
            last_modified = Some(c.row.updated_at);
            if minor >= 12 {
                body["project_id"] = json!(c.row.project_id);
                body["user_id"] = json!(c.row.user_id);
            }
            if minor >= 28 {
                body["consumer_generation"] = json!(c.row.generation);
            }
            if minor >= 38 {
                body["consumer_type"] = json!(c
                    .row
                    .consumer_type
                    .as_deref()
                    .unwrap_or(UNKNOWN_CONSUMER_TYPE));
            }
        }
        (body, last_modified)
    };
    let last_modified = last_modified.unwrap_or_else(|| app.host.now());
    Ok(ctx.cached(http::json(StatusCode::OK, &body), last_modified))
}

/// `GET /resource_providers/{uuid}/allocations`: what every consumer holds on a
/// provider.
pub async fn list_for_provider(
    ctx: Ctx,
    State(app): State<AppState>,
    path: ProviderPath,
) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.policy, PROVIDER_LIST)?;
    let minor = ctx.version.0;
    let (body, last_modified) = {
        let view = app.host.read();
        let provider = path.provider(&view, |raw| {
            format!("Resource provider '{raw}' not found: {}", no_provider(raw))
        })?;
        let mut last_modified = None;
        let by_consumer: Map<String, Value> = view
            .provider_allocations(provider.id())
            .into_iter()
            .map(|(c, amounts)| {
                last_modified = last_modified.max(Some(c.row.updated_at));
                let resources: Map<String, Value> = amounts
                    .iter()
                    .map(|(class, used)| (class.to_string(), json!(used)))
                    .collect();
                let mut entry = json!({ "resources": resources });
                if minor >= 28 {
                    entry["consumer_generation"] = json!(c.row.generation);
                }
                (c.row.uuid.to_string(), entry)
            })
            .collect();
        let body = json!({
            "allocations": by_consumer,
            "resource_provider_generation": provider.row.generation,
        });
        (body, last_modified)
    };
    let last_modified = last_modified.unwrap_or_else(|| app.host.now());
    Ok(ctx.cached(http::json(StatusCode::OK, &body), last_modified))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::validate;
    use crate::schemas::{allocations_post, allocations_put};

    const RP: &str = "7260669a-e3d4-4867-aaa7-683e2ab6958c";
    const C: &str = "599ffd2d-526a-4b2e-8683-f13ad25f9958";

    fn ordered(v: &str) -> Ordered {
        serde_json::from_str(v).unwrap()
    }

    #[test]
    fn ordered_keeps_order_and_python_duplicates() {
        let o = ordered(r#"{"b": 1, "a": [true, null, "x"], "b": 2}"#);
        let keys: Vec<&str> = o.entries().iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a"]);
        assert_eq!(o.get("b").and_then(Ordered::scalar), Some(&json!(2)));
        assert_eq!(o.get("a").map(|a| a.items().len()), Some(3));
    }

    #[test]
    fn claims_by_microversion() {
        let list = ordered(&format!(
            r#"{{"allocations": [
                {{"resource_provider": {{"uuid": "{RP}"}}, "resources": {{"VCPU": 1}}}},
                {{"resource_provider": {{"uuid": "X"}}, "resources": {{"VCPU": 1}}}},
                {{"resource_provider": {{"uuid": "{RP}"}}, "resources": {{"DISK_GB": 5, "VCPU": 2}}}}
            ]}}"#
        ));
        let c = claim(Uuid::nil(), &list, 7);
        assert_eq!(c.providers, [RP, "X"]);
        let got: Vec<(&str, u64)> = c
            .write
            .allocations
            .iter()
            .map(|r| (r.class.as_str(), r.used))
            .collect();
        assert_eq!(got, [("DISK_GB", 5), ("VCPU", 2)]);
        assert_eq!(c.write.project_id, INCOMPLETE_CONSUMER_ID);
        assert_eq!(c.write.generation, ConsumerGeneration::Unchecked);

        let dict = |extra: &str| {
            ordered(&format!(
                r#"{{"allocations": {{"{RP}": {{"resources": {{"VCPU": 1}}}}}},
                    "project_id": "p", "user_id": "u"{extra}}}"#
            ))
        };
        let c = claim(Uuid::nil(), &dict(""), 12);
        assert_eq!(
            (c.write.project_id.as_str(), c.write.user_id.as_str()),
            ("p", "u")
        );
        let cases = [
            (
                r#", "consumer_generation": null"#,
                28,
                ConsumerGeneration::New,
                "None",
            ),
            (
                r#", "consumer_generation": 4"#,
                28,
                ConsumerGeneration::Is(4),
                "4",
            ),
            (
                r#", "consumer_generation": -1"#,
                28,
                ConsumerGeneration::Is(u64::MAX),
                "-1",
            ),
            (
                r#", "consumer_generation": 4"#,
                27,
                ConsumerGeneration::Unchecked,
                "None",
            ),
        ];
        for (extra, minor, generation, shown) in cases {
            let c = claim(Uuid::nil(), &dict(extra), minor);
            assert_eq!(
                (c.write.generation, c.given_generation.as_str()),
                (generation, shown)
            );
        }
        let typed = dict(r#", "consumer_generation": null, "consumer_type": "INSTANCE""#);
        assert_eq!(
            claim(Uuid::nil(), &typed, 38)
                .write
                .consumer_type
                .as_deref(),
            Some("INSTANCE")
        );
        assert_eq!(claim(Uuid::nil(), &typed, 37).write.consumer_type, None);
    }

    #[test]
    fn schemas_by_microversion() {
        let err = |v: Value, s: Value| validate(&v, &s).unwrap_err().to_string();
        let rp =
            |resources: Value| json!([{"resource_provider": {"uuid": RP}, "resources": resources}]);
        assert!(validate(
            &json!({"allocations": rp(json!({"DISK_GB": 10}))}),
            &allocations_put(7)
        )
        .is_ok());
        assert!(err(json!({"allocations": []}), allocations_put(7))
            .contains("Failed validating 'minItems'"));
        assert!(err(
            json!({"allocations": rp(json!({"DISK_GB": 0}))}),
            allocations_put(7)
        )
        .starts_with("0 is less than the minimum of 1"));
        assert!(
            err(json!({"allocations": rp(json!({}))}), allocations_put(7))
                .contains("does not have enough properties")
        );
        // project_id and user_id: refused before 1.8, required from it.
        let owned =
            json!({"allocations": rp(json!({"DISK_GB": 10})), "project_id": "p", "user_id": "u"});
        assert!(err(owned.clone(), allocations_put(7))
            .contains("Additional properties are not allowed"));
        assert!(validate(&owned, &allocations_put(8)).is_ok());
        assert!(err(
            json!({"allocations": rp(json!({"DISK_GB": 10})), "user_id": "u"}),
            allocations_put(8)
        )
        .contains("Failed validating 'required'"));
        // The dict form from 1.12, empty from 1.28.
        assert!(err(owned, allocations_put(12)).contains("is not of type 'object'"));
        let dict =
            |allocs: Value| json!({"allocations": allocs, "project_id": "p", "user_id": "u"});
        assert!(err(
            dict(json!({"nice_house_friend": {"resources": {"VCPU": 1}}})),
            allocations_put(12)
        )
        .contains("does not match any of the regexes"));
        assert!(err(dict(json!({})), allocations_put(12))
            .starts_with("{} does not have enough properties"));
        assert!(err(dict(json!({})), allocations_put(28))
            .starts_with("'consumer_generation' is a required property"));
        let mut body = dict(json!({}));
        body["consumer_generation"] = Value::Null;
        assert!(validate(&body, &allocations_put(28)).is_ok());
        // mappings from 1.34, consumer_type required from 1.38.
        body["mappings"] = json!({"alpha": "beta"});
        assert!(err(body.clone(), allocations_put(33)).contains("'mappings' was unexpected"));
        assert!(err(body.clone(), allocations_put(34)).starts_with("'beta' is not of type 'array'"));
        body["mappings"] = json!({"": [RP]});
        assert!(validate(&body, &allocations_put(34)).is_ok());
        assert!(err(body.clone(), allocations_put(38))
            .starts_with("'consumer_type' is a required property"));
        body["consumer_type"] = json!("instance");
        assert!(err(body.clone(), allocations_put(38))
            .starts_with("'instance' does not match '^[A-Z0-9_]+$'"));
        // POST: consumers by uuid, each possibly empty.
        assert!(validate(&json!({C: dict(json!({}))}), &allocations_post(13)).is_ok());
        assert!(err(json!({}), allocations_post(13)).contains("does not have enough properties"));
        assert!(err(json!({C: dict(json!({}))}), allocations_post(28))
            .contains("'consumer_generation' is a required"));
    }
}
