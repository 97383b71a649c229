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
//! The bodies are read by `crate::request::allocations` into the core's
//! `ConsumerWrite`s, which the handler hands to the rule with its endpoint.
//!
//! The two GETs write their bodies by hand, straight from the view into one buffer
//! (see `consumer_body`, `provider_body`); the `wire::allocations` types are the
//! shape they follow and, in the tests, the oracle for their bytes.

use allot_core::names::canonical_uuid;
use allot_core::ops::allocations::{Endpoint, UNKNOWN_CONSUMER_TYPE};
use allot_core::{Consumer, Provider, ResourceClass, State as View, Timestamp};
use allot_store::WriteKind;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;

use crate::context::Ctx;
use crate::error::{ApiError, ApiResult};
use crate::policy::{authorize, Action};
use crate::request::allocations::{consumer_uuid, read_post, read_put};
use crate::request::path::{no_provider, ProviderPath};
use crate::request::JsonBody;
use crate::wire::write;
use crate::{http, AppState};

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

// ----- handlers -----

/// `PUT /allocations/{consumer_uuid}`: replace everything a consumer holds.
pub async fn replace(
    ctx: Ctx,
    State(app): State<AppState>,
    Path(raw): Path<String>,
    body: JsonBody,
) -> ApiResult {
    body.require_json()?;
    authorize(&ctx, app.config.settings.policy, UPDATE)?;
    let consumer = consumer_uuid(&raw)?;
    let writes = [read_put(&body, consumer, ctx.version.0)?];
    app.write(WriteKind::Allocation, move |view, now| {
        view.plan_allocations(&writes, Endpoint::Put, now)
    })
    .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

/// `POST /allocations` (1.13): replace the allocations of several consumers at once,
/// all or nothing; a consumer given no allocations loses all it holds.
pub async fn create_many(ctx: Ctx, State(app): State<AppState>, body: JsonBody) -> ApiResult {
    ctx.require(13)?;
    body.require_json()?;
    authorize(&ctx, app.config.settings.policy, MANAGE)?;
    let writes = read_post(&body, ctx.version.0)?;
    app.write(WriteKind::Allocation, move |view, now| {
        view.plan_allocations(&writes, Endpoint::Post, now)
    })
    .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

/// `DELETE /allocations/{consumer_uuid}`.
pub async fn delete(ctx: Ctx, State(app): State<AppState>, Path(raw): Path<String>) -> ApiResult {
    authorize(&ctx, app.config.settings.policy, DELETE)?;
    // Placement looks the consumer up by the text of the path.
    let consumer = canonical_uuid(&raw)
        .ok_or_else(|| ApiError::not_found(format!("No allocations for consumer '{raw}'")))?;
    app.write(WriteKind::Allocation, move |view, _| {
        view.delete_allocations(&consumer)
    })
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
    authorize(&ctx, app.config.settings.policy, LIST)?;
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
    authorize(&ctx, app.config.settings.policy, PROVIDER_LIST)?;
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
mod tests {
    use super::*;
    use crate::handlers::test_support::{same, world};
    use crate::wire;
    use allot_core::Uuid;
    use std::collections::BTreeMap;

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
                    same(bytes, &maps, &format!("1.{minor} {uuid}"));
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
                    same(bytes, &maps, &format!("1.{minor} {uuid}"));
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
}
