//! Allocations: `GET/PUT/DELETE /allocations/{consumer_uuid}`, `POST /allocations`
//! (1.13) and `GET /resource_providers/{uuid}/allocations`.
//!
//! The rules, their order and their wording live in `allot_core::ops::allocations`
//! (one rule for every write, `State::plan_allocations`); here are the HTTP
//! concerns: the order of Placement's checks before the rule (content type, policy,
//! the consumer uuid, the schema) and the body forms of each microversion (the 1.0
//! list, the 1.12 dict, `project_id`/`user_id` from 1.8, `consumer_generation` from
//! 1.28, `mappings` from 1.34, `consumer_type` from 1.38).
//!
//! A body is parsed once into a `serde_json::Value`, checked against its schema, and
//! that same tree is read into [`ConsumerBody`], the one typed form of a consumer's
//! part of a write, which PUT, POST and the reshaper share; [`ConsumerBody::into_write`]
//! turns it into the core's `ConsumerWrite` (providers as the request spelled them,
//! classes, amounts, the generation as given, owner and type), which the handler
//! hands to the rule with its endpoint. Request objects keep the order of the text
//! (see [`Entries`]), because the rule walks them in that order, as Placement does.
//!
//! The two GETs write their bodies by hand, straight from the view into one buffer
//! (see `consumer_body`, `provider_body`); the `wire::allocations` types are the
//! shape they follow and, in the tests, the oracle for their bytes.

use std::marker::PhantomData;

use allot_core::names::canonical_uuid;
use allot_core::ops::allocations::{
    ConsumerGeneration, ConsumerWrite, Endpoint, Requested, INCOMPLETE_CONSUMER_ID,
    UNKNOWN_CONSUMER_TYPE,
};
use allot_core::{Consumer, Provider, ProviderRef, ResourceClass, State as View, Timestamp, Uuid};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::context::Ctx;
use crate::error::{ApiError, ApiResult};
use crate::params::{no_provider, uuid_like, ProviderPath};
use crate::policy::{authorize, Action};
use crate::wire::write;
use crate::{http, schemas, AppState};

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

/// The entries of a JSON object in the order of the request text (serde_json's
/// `preserve_order` keeps it; a repeated key has its first place and its last value,
/// as in Placement's Python dicts). Placement walks request objects in that order,
/// which decides which of several problems a request is refused for.
#[derive(Debug)]
pub(crate) struct Entries<T>(pub(crate) Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Entries<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Walk<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Walk<T> {
            type Value = Entries<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<T>, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(Walk(PhantomData))
    }
}

/// Tells a key given as `null` (Some(None)) from one left out (None, by
/// `#[serde(default)]`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

/// One consumer's part of a write, in the form of any microversion: the whole body of
/// `PUT /allocations/{consumer}`, and each consumer's entry in `POST /allocations` and
/// in the reshaper's `allocations`. Read from the tree the schema has checked, so
/// every field has the type and range it says. `mappings` (1.34) is checked there and
/// otherwise ignored, as Placement stores nothing of it.
#[derive(Debug, Deserialize)]
pub(crate) struct ConsumerBody {
    allocations: AllocationsBody,
    project_id: Option<String>,
    user_id: Option<String>,
    /// Left out (before 1.28), null (a new consumer) or any integer.
    #[serde(default, deserialize_with = "present")]
    consumer_generation: Option<Option<i128>>,
    consumer_type: Option<String>,
}

/// The allocations of one consumer.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum AllocationsBody {
    /// Before 1.12: a list of `{resource_provider: {uuid}, resources}`.
    List(Vec<ListedAllocation>),
    /// From 1.12: `{resources}` by provider uuid.
    ByProvider(Entries<ProviderAmounts>),
}

#[derive(Debug, Deserialize)]
struct ListedAllocation {
    resource_provider: ProviderName,
    resources: Entries<u64>,
}

#[derive(Debug, Deserialize)]
struct ProviderName {
    uuid: String,
}

/// A provider's part of the dict form (its `generation`, which clients may copy
/// from a GET, is ignored, as Placement ignores it).
#[derive(Debug, Deserialize)]
struct ProviderAmounts {
    resources: Entries<u64>,
}

impl ConsumerBody {
    /// The core's write for `consumer`, at microversion `1.minor`.
    pub(crate) fn into_write(self, consumer: Uuid, minor: u16) -> ConsumerWrite {
        let by_provider: Vec<(String, Entries<u64>)> = match self.allocations {
            AllocationsBody::List(items) => {
                // Placement turns the list into a dict by provider uuid, so a provider
                // listed twice keeps its first place and its last amounts.
                let mut by_provider: Vec<(String, Entries<u64>)> = Vec::new();
                for item in items {
                    let uuid = item.resource_provider.uuid;
                    match by_provider.iter_mut().find(|(u, _)| *u == uuid) {
                        Some(slot) => slot.1 = item.resources,
                        None => by_provider.push((uuid, item.resources)),
                    }
                }
                by_provider
            }
            AllocationsBody::ByProvider(Entries(entries)) => entries
                .into_iter()
                .map(|(uuid, amounts)| (uuid, amounts.resources))
                .collect(),
        };
        let mut allocations = Vec::new();
        for (uuid, Entries(resources)) in by_provider {
            let provider = ProviderRef::parse(&uuid);
            for (class, used) in resources {
                allocations.push(Requested {
                    provider: provider.clone(),
                    // The schema's pattern has no length limit: a key too long to
                    // be a class is refused by the rule as an unknown class.
                    class: ResourceClass::requested(&class),
                    used,
                });
            }
        }

        // Before 1.8 neither is allowed, and Placement uses its "incomplete consumer"
        // project and user.
        let owner = |id: Option<String>| match id {
            Some(id) if minor >= 8 => id,
            _ => INCOMPLETE_CONSUMER_ID.to_owned(),
        };
        let generation = match self.consumer_generation {
            _ if minor < 28 => ConsumerGeneration::Unchecked,
            Some(Some(given)) => ConsumerGeneration::Is(given),
            _ => ConsumerGeneration::New,
        };
        ConsumerWrite {
            consumer,
            project_id: owner(self.project_id),
            user_id: owner(self.user_id),
            consumer_type: self.consumer_type.filter(|_| minor >= 38),
            generation,
            allocations,
        }
    }
}

/// The consumers of a `POST /allocations` body, or of the reshaper's `allocations`
/// (which has the same form), as the core's writes, in request order.
pub(crate) fn consumer_writes(
    consumers: Entries<ConsumerBody>,
    minor: u16,
    endpoint: Endpoint,
) -> Result<Vec<ConsumerWrite>, ApiError> {
    let mut writes: Vec<ConsumerWrite> = Vec::new();
    for (key, body) in consumers.0 {
        // The schema let through 36 hex digits and dashes; Placement would keep a
        // key it cannot read as a uuid as an opaque consumer id, which we cannot.
        let consumer = uuid_like(&key).ok_or_else(|| {
            ApiError::bad_request(match endpoint {
                Endpoint::Reshaper => {
                    format!("JSON does not validate: '{key}' is not a valid consumer uuid")
                }
                Endpoint::Put | Endpoint::Post => format!("Malformed consumer_uuid: {key}"),
            })
        })?;
        // Two spellings of one uuid name one consumer here: the last one wins.
        writes.retain(|w| w.consumer != consumer);
        writes.push(body.into_write(consumer, minor));
    }
    Ok(writes)
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
    let body: ConsumerBody = http::json_body(&headers, &body, &schemas::allocations_put(minor))?;
    let writes = [body.into_write(consumer, minor)];
    app.write(move |view, now| view.plan_allocations(&writes, Endpoint::Put, now))
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
    let consumers = http::json_body(&headers, &body, &schemas::allocations_post(minor))?;
    let writes = consumer_writes(consumers, minor, Endpoint::Post)?;
    app.write(move |view, now| view.plan_allocations(&writes, Endpoint::Post, now))
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
    let (body, last_modified) = {
        let view = app.host.read();
        let consumer = canonical_uuid(&raw).and_then(|u| view.consumer(&u));
        consumer_body(&view, consumer, ctx.version.0)
    };
    let last_modified = last_modified.unwrap_or_else(|| app.host.now());
    Ok(ctx.cached(http::json_bytes(StatusCode::OK, body), last_modified))
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
    let (body, last_modified) = {
        let view = app.host.read();
        let provider = path.provider(&view, |raw| {
            format!("Resource provider '{raw}' not found: {}", no_provider(raw))
        })?;
        provider_body(&view, provider, ctx.version.0)
    };
    let last_modified = last_modified.unwrap_or_else(|| app.host.now());
    Ok(ctx.cached(http::json_bytes(StatusCode::OK, body), last_modified))
}

// ----- writing bodies -----
//
// Both GETs write their body straight from the view into one buffer sized up front,
// in the shape of `wire::allocations` (whose field order they follow; the tests keep
// those types as the oracle and hold the two to the same bytes): no map is built per
// provider or per consumer, and uuids are formatted on the stack.

/// Room for a quoted uuid key and the punctuation around it.
const UUID_KEY: usize = write::UUID_LEN + 4;

/// The body of `GET /allocations/{consumer}` at `1.minor`, and the consumer's last
/// change if it holds anything. Providers come in the view's order (their creation
/// order), each as `generation` then `resources`; the consumer's own fields follow
/// only when it holds something.
fn consumer_body(
    view: &View,
    consumer: Option<&Consumer>,
    minor: u16,
) -> (Vec<u8>, Option<Timestamp>) {
    let held = consumer
        .map(|c| view.consumer_allocations(&c.row.uuid))
        .unwrap_or_default();
    let owner = consumer.filter(|_| !held.is_empty());

    // The keys and numbers of the consumer's own fields, then each provider's.
    let mut size = 128 + 4 * write::INT;
    if let Some(c) = owner {
        size += c.row.project_id.len()
            + c.row.user_id.len()
            + c.row.consumer_type.as_deref().map_or(16, str::len);
    }
    for h in &held {
        size += UUID_KEY + 32 + write::INT + amounts_size(h.resources.iter().map(|r| r.0));
    }
    let mut out = Vec::with_capacity(size);

    out.extend_from_slice(b"{\"allocations\":{");
    for (i, h) in held.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write::uuid(&mut out, &h.provider.uuid());
        out.extend_from_slice(b":{\"generation\":");
        write::uint(&mut out, h.provider.row.generation);
        out.extend_from_slice(b",\"resources\":");
        write::amounts(
            &mut out,
            h.resources
                .iter()
                .map(|(class, used)| (class.as_str(), *used)),
        );
        out.push(b'}');
    }
    out.push(b'}');
    if let Some(c) = owner {
        if minor >= 12 {
            out.extend_from_slice(b",\"project_id\":");
            write::string(&mut out, &c.row.project_id);
            out.extend_from_slice(b",\"user_id\":");
            write::string(&mut out, &c.row.user_id);
        }
        if minor >= 28 {
            out.extend_from_slice(b",\"consumer_generation\":");
            write::uint(&mut out, c.row.generation);
        }
        if minor >= 38 {
            out.extend_from_slice(b",\"consumer_type\":");
            let kind = c.row.consumer_type.as_deref();
            write::string(&mut out, kind.unwrap_or(UNKNOWN_CONSUMER_TYPE));
        }
    }
    out.push(b'}');
    (out, owner.map(|c| c.row.updated_at))
}

/// The body of `GET /resource_providers/{uuid}/allocations` at `1.minor`, and the
/// last change of the consumers in it. Consumers come by uuid (the usage index keeps
/// them sorted, and a uuid orders as its text), each as `resources` then, from 1.28,
/// `consumer_generation`.
///
/// The consumers are read from the provider's usage index and their amounts here
/// picked out of their own allocations as they are written, rather than through
/// `State::provider_allocations`, which collects a list per consumer: on a provider
/// with thousands of consumers that list is most of what the answer would allocate.
fn provider_body(view: &View, provider: &Provider, minor: u16) -> (Vec<u8>, Option<Timestamp>) {
    let id = provider.id();
    let index = view.provider_usage_index(id);
    let consumers = index.map_or(&[][..], |u| u.consumers.iter().as_slice());
    // Each consumer holds some of the classes allocated here, never more.
    let per_consumer = index.map_or(0, |u| amounts_size(u.by_class.iter().map(|(c, _)| c)));
    let size = 64 + consumers.len() * (UUID_KEY + 48 + write::INT + per_consumer);
    let mut out = Vec::with_capacity(size);

    let mut last_modified = None;
    out.extend_from_slice(b"{\"allocations\":{");
    for (i, c) in consumers
        .iter()
        .filter_map(|u| view.consumer(u))
        .enumerate()
    {
        last_modified = last_modified.max(Some(c.row.updated_at));
        if i > 0 {
            out.push(b',');
        }
        write::uuid(&mut out, &c.row.uuid);
        out.extend_from_slice(b":{\"resources\":");
        let here = c.allocations.iter().filter(|a| a.provider == id);
        write::amounts(&mut out, here.map(|a| (a.class.as_str(), a.used)));
        if minor >= 28 {
            out.extend_from_slice(b",\"consumer_generation\":");
            write::uint(&mut out, c.row.generation);
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"},\"resource_provider_generation\":");
    write::uint(&mut out, provider.row.generation);
    out.push(b'}');
    (out, last_modified)
}

/// Room for `{class: amount}` of these classes.
fn amounts_size<'a>(classes: impl Iterator<Item = &'a ResourceClass>) -> usize {
    2 + classes
        .map(|c| c.as_str().len() + write::AMOUNT_ENTRY)
        .sum::<usize>()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::schema::validate;
    use crate::schemas::{allocations_post, allocations_put};
    use crate::wire;
    use allot_core::{Change, Inventory};
    use serde_json::{json, Value};
    use std::collections::BTreeMap;

    const RP: &str = "7260669a-e3d4-4867-aaa7-683e2ab6958c";
    const C: &str = "599ffd2d-526a-4b2e-8683-f13ad25f9958";

    /// A body as the handlers read it: parsed once into a tree, then typed.
    fn body<T: serde::de::DeserializeOwned>(text: &str) -> T {
        let value: Value = serde_json::from_str(text).unwrap();
        serde_json::from_value(value).unwrap()
    }

    fn write(text: &str, minor: u16) -> ConsumerWrite {
        body::<ConsumerBody>(text).into_write(Uuid::nil(), minor)
    }

    /// Amounts by class name, as the bodies were built before they were written by
    /// hand.
    fn by_class<'a>(
        amounts: impl IntoIterator<Item = (&'a ResourceClass, u64)>,
    ) -> BTreeMap<&'a str, u64> {
        amounts
            .into_iter()
            .map(|(class, used)| (class.as_str(), used))
            .collect()
    }

    /// `GET /allocations/{consumer}` as it was built before [`consumer_body`] wrote it
    /// straight from the view: the `wire::allocations` maps, the oracle for the bytes.
    fn consumer_body_by_maps<'a>(
        view: &'a View,
        consumer: Option<&'a Consumer>,
        minor: u16,
    ) -> wire::ConsumerAllocations<'a> {
        let held = consumer
            .map(|c| view.consumer_allocations(&c.row.uuid))
            .unwrap_or_default();
        let allocations = wire::InOrder(
            held.iter()
                .map(|h| {
                    let on_provider = wire::HeldOnProvider {
                        generation: h.provider.row.generation,
                        resources: by_class(h.resources.iter().copied()),
                    };
                    (h.provider.uuid(), on_provider)
                })
                .collect(),
        );
        let mut body = wire::ConsumerAllocations {
            allocations,
            project_id: None,
            user_id: None,
            consumer_generation: None,
            consumer_type: None,
        };
        if let (Some(c), false) = (consumer, held.is_empty()) {
            if minor >= 12 {
                body.project_id = Some(&c.row.project_id);
                body.user_id = Some(&c.row.user_id);
            }
            if minor >= 28 {
                body.consumer_generation = Some(c.row.generation);
            }
            if minor >= 38 {
                body.consumer_type = Some(
                    c.row
                        .consumer_type
                        .as_deref()
                        .unwrap_or(UNKNOWN_CONSUMER_TYPE),
                );
            }
        }
        body
    }

    /// `GET /resource_providers/{uuid}/allocations` as it was built before
    /// [`provider_body`]: the oracle for the bytes, and the last change it saw.
    fn provider_body_by_maps<'a>(
        view: &'a View,
        provider: &'a Provider,
        minor: u16,
    ) -> (wire::ProviderAllocations<'a>, Option<Timestamp>) {
        let mut last_modified = None;
        let allocations = view
            .provider_allocations(provider.id())
            .into_iter()
            .map(|(c, amounts)| {
                last_modified = last_modified.max(Some(c.row.updated_at));
                let held = wire::HeldByConsumer {
                    resources: by_class(amounts),
                    consumer_generation: (minor >= 28).then_some(c.row.generation),
                };
                (&c.row.uuid, held)
            })
            .collect();
        let body = wire::ProviderAllocations {
            allocations,
            resource_provider_generation: provider.row.generation,
        };
        (body, last_modified)
    }

    /// Projects and users of the test world, some needing escapes.
    pub(crate) const PROJECTS: [&str; 3] = ["p1", "p\"2\\", "p\u{1}ü"];
    pub(crate) const USERS: [&str; 2] = ["u1", "u\t2"];
    const CLASSES: [&str; 5] = ["VCPU", "MEMORY_MB", "DISK_GB", "VGPU", "SRIOV_NET_VF"];

    /// A view of `providers` providers (uuids in an order unlike their creation
    /// order, one of them with no inventory) and `consumers` consumers, each written
    /// through the allocation rule with random amounts of random classes on one to
    /// three providers, random owners and types (or none); some are written twice and
    /// some deleted again. Returns the view and every consumer uuid ever written.
    pub(crate) fn world(seed: u64, providers: u128, consumers: u128) -> (View, Vec<Uuid>) {
        let mut x = seed | 1;
        let mut next = move |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let mut view = View::new();
        let mut ids = Vec::new();
        for n in 0..providers {
            let uuid = Uuid::from_u128(((n * 7) % providers + 1) << 64 | n);
            let (_, c) = view
                .create_provider(uuid, &format!("rp{n}"), None, 0)
                .unwrap();
            view.apply(&c);
            let id = view.provider_by_uuid(&uuid).unwrap().id();
            // The last provider has no inventory: nothing is ever allocated there.
            if n + 1 < providers {
                let inventories = CLASSES
                    .iter()
                    .map(|c| {
                        (
                            ResourceClass::new_unchecked(c),
                            Inventory::with_total(1 << 40),
                        )
                    })
                    .collect();
                view.apply(&[Change::SetInventories(id, inventories)]);
            }
            ids.push(uuid);
        }
        let stocked = &ids[..ids.len() - 1];
        let mut written = Vec::new();
        for n in 0..consumers {
            let consumer = Uuid::from_u128(((n * 13) % consumers + 1) << 96 | n);
            written.push(consumer);
            for _ in 0..1 + usize::from(next(4) == 0) {
                let mut allocations = Vec::new();
                for _ in 0..1 + next(3) {
                    let provider = stocked[next(stocked.len())];
                    for _ in 0..1 + next(3) {
                        allocations.push(Requested {
                            provider: ProviderRef::from(provider),
                            class: ResourceClass::requested(CLASSES[next(CLASSES.len())]),
                            used: 1 + next(1000) as u64,
                        });
                    }
                }
                let types = [None, Some("INSTANCE"), Some("MIGRATION")];
                let write = ConsumerWrite {
                    consumer,
                    project_id: PROJECTS[next(PROJECTS.len())].to_owned(),
                    user_id: USERS[next(USERS.len())].to_owned(),
                    consumer_type: types[next(types.len())].map(str::to_owned),
                    generation: ConsumerGeneration::Unchecked,
                    allocations,
                };
                let now = 1000 + next(1000) as Timestamp;
                let (_, changes) = view.plan_allocations(&[write], Endpoint::Put, now).unwrap();
                view.apply(&changes);
            }
            if next(10) == 0 {
                let (_, changes) = view.delete_allocations(&consumer).unwrap();
                view.apply(&changes);
            }
        }
        (view, written)
    }

    /// Both GETs write the same bytes as the maps they replace, at every microversion,
    /// for consumers that hold much, little or nothing (deleted, never known) and for
    /// providers with many consumers, one, or none.
    #[test]
    fn bodies_match_the_maps() {
        for (seed, providers, consumers) in [(1, 2, 1), (7, 5, 40), (99, 9, 300)] {
            let (view, written) = world(seed, providers, consumers);
            let mut uuids = written.clone();
            uuids.push(Uuid::from_u128(0xdead));
            let mut held = 0;
            for minor in 0..=39 {
                for uuid in &uuids {
                    let consumer = view.consumer(uuid);
                    let (bytes, last_modified) = consumer_body(&view, consumer, minor);
                    let maps = consumer_body_by_maps(&view, consumer, minor);
                    let text = String::from_utf8(bytes).unwrap();
                    assert_eq!(
                        text,
                        serde_json::to_string(&maps).unwrap(),
                        "1.{minor} {uuid}"
                    );
                    let parsed: Value = serde_json::from_str(&text).unwrap();
                    assert_eq!(parsed, serde_json::to_value(&maps).unwrap());
                    assert_eq!(
                        last_modified,
                        consumer
                            .map(|c| c.row.updated_at)
                            .filter(|_| !maps.allocations.0.is_empty())
                    );
                    held += usize::from(!maps.allocations.0.is_empty());
                }
                for n in 0..providers {
                    let uuid = Uuid::from_u128(((n * 7) % providers + 1) << 64 | n);
                    let provider = view.provider_by_uuid(&uuid).unwrap();
                    let (bytes, last_modified) = provider_body(&view, provider, minor);
                    let (maps, last_by_maps) = provider_body_by_maps(&view, provider, minor);
                    let text = String::from_utf8(bytes).unwrap();
                    assert_eq!(
                        text,
                        serde_json::to_string(&maps).unwrap(),
                        "1.{minor} {uuid}"
                    );
                    let parsed: Value = serde_json::from_str(&text).unwrap();
                    assert_eq!(parsed, serde_json::to_value(&maps).unwrap());
                    assert_eq!(last_modified, last_by_maps);
                }
            }
            // Some consumers hold something (every one of them, at every microversion).
            assert!(held > 0 || seed == 1, "{seed}: {held}");
        }
    }

    /// The body of one provider's allocations, written by hand (for the figures of
    /// `docs/performance.md`: `toggle-collect` in callgrind finds it by name).
    #[inline(never)]
    fn measure_written(view: &View, provider: &Provider) -> usize {
        provider_body(view, provider, 39).0.len()
    }

    /// The same body, built as the maps were and serialized as `http::json` did.
    #[inline(never)]
    fn measure_maps(view: &View, provider: &Provider) -> usize {
        let (body, _) = provider_body_by_maps(view, provider, 39);
        serde_json::to_vec(&body).unwrap_or_default().len()
    }

    /// `GET /resource_providers/{uuid}/allocations` on a provider with 10,000
    /// consumers, written by hand and through the maps, in alternation: the median
    /// time of each (run it under callgrind with `--toggle-collect` for instructions;
    /// see `docs/performance.md`).
    #[test]
    #[ignore = "a measurement, not a check"]
    fn provider_allocations_cost() {
        let (view, _) = world(3, 2, 11_100);
        let provider = view
            .providers()
            .find(|p| !p.inventories.is_empty())
            .unwrap();
        let consumers = view
            .provider_usage_index(provider.id())
            .unwrap()
            .consumers
            .len();
        let runs = std::env::var("RUNS").map_or(21, |r| r.parse().unwrap());
        let (mut written, mut maps) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let start = std::time::Instant::now();
            let a = measure_written(&view, provider);
            written.push(start.elapsed());
            let start = std::time::Instant::now();
            let b = measure_maps(&view, provider);
            maps.push(start.elapsed());
            assert_eq!(a, b);
        }
        written.sort();
        maps.sort();
        let bytes = measure_written(&view, provider);
        println!(
            "{consumers} consumers, {bytes} bytes: written {:?}, maps {:?} (medians of {runs})",
            written[runs / 2],
            maps[runs / 2]
        );
    }

    #[test]
    fn entries_keep_order_and_python_duplicates() {
        let Entries(entries) =
            body::<Entries<Value>>(r#"{"b": 1, "a": [true, null, "x"], "b": 2}"#);
        let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a"]);
        assert_eq!(entries[0].1, json!(2));
        assert_eq!(entries[1].1.as_array().map(Vec::len), Some(3));
    }

    #[test]
    fn claims_by_microversion() {
        let list = format!(
            r#"{{"allocations": [
                {{"resource_provider": {{"uuid": "{RP}"}}, "resources": {{"VCPU": 1}}}},
                {{"resource_provider": {{"uuid": "X"}}, "resources": {{"VCPU": 1}}}},
                {{"resource_provider": {{"uuid": "{RP}"}}, "resources": {{"DISK_GB": 5, "VCPU": 2}}}}
            ]}}"#
        );
        let w = write(&list, 7);
        // A provider listed twice keeps its first place and its last amounts; one
        // that is not spelled as a uuid is kept as written.
        let got: Vec<(String, &str, u64)> = w
            .allocations
            .iter()
            .map(|r| (r.provider.to_string(), r.class.as_str(), r.used))
            .collect();
        assert_eq!(
            got,
            [
                (RP.to_owned(), "DISK_GB", 5),
                (RP.to_owned(), "VCPU", 2),
                ("X".to_owned(), "VCPU", 1)
            ]
        );
        assert_eq!(w.allocations[2].provider, ProviderRef::Spelled("X".into()));
        // A key the schema's pattern lets through but too long to be a class is
        // handed on as text that names none.
        let long = "A".repeat(256);
        let w = write(
            &format!(
                r#"{{"allocations": [{{"resource_provider": {{"uuid": "{RP}"}},
                    "resources": {{"{long}": 1}}}}]}}"#
            ),
            7,
        );
        assert_eq!(
            w.allocations[0].class,
            allot_core::RequestedName::NotAName(long)
        );
        assert_eq!(w.project_id, INCOMPLETE_CONSUMER_ID);
        assert_eq!(w.generation, ConsumerGeneration::Unchecked);

        let dict = |extra: &str| {
            format!(
                r#"{{"allocations": {{"{RP}": {{"resources": {{"VCPU": 1}}}}}},
                    "project_id": "p", "user_id": "u"{extra}}}"#
            )
        };
        let w = write(&dict(""), 12);
        assert_eq!((w.project_id.as_str(), w.user_id.as_str()), ("p", "u"));
        assert_eq!(
            w.allocations[0].provider,
            ProviderRef::Uuid(RP.parse().unwrap())
        );
        let cases = [
            (
                r#", "consumer_generation": null"#,
                28,
                ConsumerGeneration::New,
            ),
            (
                r#", "consumer_generation": 4"#,
                28,
                ConsumerGeneration::Is(4),
            ),
            // Negative, and beyond i64: kept as given, for the conflict message.
            (
                r#", "consumer_generation": -1"#,
                28,
                ConsumerGeneration::Is(-1),
            ),
            (
                r#", "consumer_generation": 18446744073709551615"#,
                28,
                ConsumerGeneration::Is(u64::MAX.into()),
            ),
            (
                r#", "consumer_generation": 4"#,
                27,
                ConsumerGeneration::Unchecked,
            ),
        ];
        for (extra, minor, generation) in cases {
            assert_eq!(write(&dict(extra), minor).generation, generation, "{extra}");
        }
        let typed = dict(r#", "consumer_generation": null, "consumer_type": "INSTANCE""#);
        assert_eq!(write(&typed, 38).consumer_type.as_deref(), Some("INSTANCE"));
        assert_eq!(write(&typed, 37).consumer_type, None);
    }

    #[test]
    fn consumers_by_uuid() {
        let one = |n: u64| {
            format!(
                r#"{{"allocations": {{"{RP}": {{"resources": {{"VCPU": {n}}}}}}},
                    "project_id": "p", "user_id": "u"}}"#
            )
        };
        let upper = C.to_uppercase();
        let other = "7260669a-0000-4867-aaa7-683e2ab6958c";
        let text = format!(
            r#"{{"{C}": {}, "{other}": {}, "{upper}": {}}}"#,
            one(1),
            one(2),
            one(3)
        );
        let writes = consumer_writes(body(&text), 13, Endpoint::Post).unwrap();
        // Two spellings of one uuid: one consumer, the last one, in its place.
        let got: Vec<(String, u64)> = writes
            .iter()
            .map(|w| (w.consumer.to_string(), w.allocations[0].used))
            .collect();
        assert_eq!(got, [(other.to_owned(), 2), (C.to_owned(), 3)]);

        let bad = "0123456789abcdef0123456789abcdef012-";
        let text = format!(r#"{{"{bad}": {}}}"#, one(1));
        let e = consumer_writes(body(&text), 13, Endpoint::Post).unwrap_err();
        assert_eq!(e.message, format!("Malformed consumer_uuid: {bad}"));
        let e = consumer_writes(body(&text), 30, Endpoint::Reshaper).unwrap_err();
        assert_eq!(
            e.message,
            format!("JSON does not validate: '{bad}' is not a valid consumer uuid")
        );
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
                .contains("should be non-empty")
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
        assert!(err(dict(json!({})), allocations_put(12)).starts_with("{} should be non-empty"));
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
        assert!(err(json!({}), allocations_post(13)).contains("should be non-empty"));
        assert!(err(json!({C: dict(json!({}))}), allocations_post(28))
            .contains("'consumer_generation' is a required"));
    }
}
